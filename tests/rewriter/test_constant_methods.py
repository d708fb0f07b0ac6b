"""MND310 repaired by folding a method of Python values to constants (rewriter/fixes/constant_methods.py)."""

from __future__ import annotations

import pytest

from mend.rewriter import FixOptions, fix_source
from tests.rewriter.conftest import diag, load_fixture

torch = pytest.importorskip("torch")

_SRC = '''
import torch
from torch import nn


class Positions(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.config = config
        self.proj = nn.Linear(4, 4)

    def embeds(self, n: int, device: torch.device):
        pos = torch.arange(0, n, dtype=torch.int32, device=device){more}
        return self.relative(pos, self.config["stride"])

    def relative(self, pos: torch.Tensor, stride: int):
        return torch.arange(pos[-1], pos[0] - 1, -stride)
'''


@pytest.mark.parametrize(("more", "reason"), [
    (" * self.proj.weight.sum()", "reads `self.proj`, which may be module state"),
    ("\n        self.last = n", "assigns `self.last`"),
    (" + torch.randint(0, 2, (1,))", "draws random numbers"),
    (" + helper(n)", "calls `helper`, which mend cannot see is a constant"),
    ("\n        pos.add_(1)", "(random or in place)"),
])
def test_declined_where_the_method_reads_or_changes_more_than_its_arguments(more: str, reason: str) -> None:
    src = _SRC.format(more=more)
    line = src.splitlines().index("        return torch.arange(pos[-1], pos[0] - 1, -stride)") + 1
    res = fix_source(src, "t.py", [diag("MND310", line, 16)], FixOptions(unsafe=True))
    assert res.fixed == src
    assert reason in res.remaining[0].reason, res.remaining[0].reason


def test_folds_the_method_of_python_values_that_reaches_the_site() -> None:
    src = _SRC.format(more="")
    line = src.splitlines().index("        return torch.arange(pos[-1], pos[0] - 1, -stride)") + 1
    res = fix_source(src, "t.py", [diag("MND310", line, 16)], FixOptions(unsafe=True))
    assert ("        if torch.compiler.is_compiling() and not _mend_constant.active:\n"
            "            return _mend_constant(Positions.embeds, self, n, device)\n") in res.fixed
    assert fix_source(src, "t.py", [diag("MND310", line, 16)], FixOptions()).remaining[0].unsafe_available


def _fixture(kind: str):
    return load_fixture("constant_method", kind)


def _graphs(fn, x) -> tuple[int, torch.Tensor]:
    graphs = []

    def backend(gm, example_inputs):
        graphs.append(gm)
        return gm.forward

    torch._dynamo.reset()
    out = torch.compile(fn, backend=backend)(x)
    return len(graphs), out


def test_compiled_result_is_bitwise_eager_and_training_runs_the_original() -> None:
    ns = _fixture("out")
    x = torch.randn(2, 8, 8)
    graphs, out = _graphs(ns["f"], x)
    assert graphs == 1 and torch.equal(out, ns["f"](x))
    ns["model"].train()  # dropout draws: the fold is off, the original (and its breaks) runs
    graphs, _ = _graphs(ns["f"], x)
    assert graphs > 1


def test_a_class_with_integer_buffers_leaves_sites_they_do_not_feed_to_the_fold() -> None:
    """The integer-buffer fold claimed every size site of its class (found by the property tests with both
    blocks in one module): a site the buffers do not feed now goes to the method-of-Python-values fold."""
    src = _SRC.format(more="").replace(
        "        self.proj = nn.Linear(4, 4)\n",
        "        self.proj = nn.Linear(4, 4)\n"
        "        self.register_buffer(\"stride\", torch.tensor(2, dtype=torch.int64), persistent=False)\n"
        "\n    def pad(self, x):\n        return nn.functional.pad(x, (0, self.stride))\n")
    line = src.splitlines().index("        return torch.arange(pos[-1], pos[0] - 1, -stride)") + 1
    res = fix_source(src, "t.py", [diag("MND310", line, 16)], FixOptions(unsafe=True))
    assert "return _mend_constant(Positions.embeds, self, n, device)" in res.fixed
    assert "_mend_fold" not in res.fixed


@pytest.mark.parametrize("helper", ["_mend_constant", "_mend_fold"])
@pytest.mark.parametrize(("version", "folds"), [("2.11.0+cu130", False), ("2.12.1", False), ("2.13.0+cpu", True),
                                                ("3.0.0", True)])
def test_the_fold_runs_the_method_as_written_on_a_torch_before_2_13(helper, version, folds, monkeypatch) -> None:
    """torch 2.11 fails while tracing (InternalTorchDynamoError: a module is not a constant) where a module is
    handed to assume_constant_result: there the folded method runs its original code (``.active``)."""
    from tests.rewriter.conftest import helpers

    monkeypatch.setattr(torch, "__version__", version)
    ns = helpers(helper)
    assert ns[helper].active is (not folds)
