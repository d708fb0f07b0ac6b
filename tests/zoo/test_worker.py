"""The zoo worker compiles a copy of the model as built (not the model its eager forward ran)."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from benchmarks.zoo.worker import _copy  # noqa: E402


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


def test_inputs_move_to_the_device_also_inside_lists_and_dicts():
    torch = pytest.importorskip("torch")
    from benchmarks.zoo.worker import _to_device

    t = torch.ones(2)
    moved = _to_device({"a": t, "b": [t, (t, 3)], "c": {"d": t}, "e": "text"}, "meta")
    assert moved["a"].device.type == "meta" and moved["b"][0].device.type == "meta"
    assert isinstance(moved["b"][1], tuple) and moved["b"][1][0].device.type == "meta" and moved["b"][1][1] == 3
    assert moved["c"]["d"].device.type == "meta" and moved["e"] == "text"
