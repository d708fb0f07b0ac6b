"""The zoo worker compiles a copy of the model as built (not the model its eager forward ran)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from mend.zoo.worker import _copy  # noqa: E402


def test_the_compiled_model_is_a_copy_as_built() -> None:
    class Switching(torch.nn.Module):
        """Its forward changes its own state, as BigBird's switch to full attention does."""

        def __init__(self) -> None:
            super().__init__()
            self.lin = torch.nn.Linear(2, 2)
            self.full = False

        def forward(self, x):
            self.full = True
            return self.lin(x)

    model = Switching()
    fresh = _copy(model)
    model(torch.randn(1, 2))
    assert model.full and not fresh.full
    assert fresh.lin.weight is not model.lin.weight and torch.equal(fresh.lin.weight, model.lin.weight)


def test_a_model_that_cannot_be_copied_is_compiled_itself() -> None:
    class Uncopyable(torch.nn.Module):
        def __deepcopy__(self, memo):
            raise TypeError("holds a handle")

    model = Uncopyable()
    assert _copy(model) is model
