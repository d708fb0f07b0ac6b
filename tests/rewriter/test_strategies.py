"""Every repair strategy's before/after examples, as tests (Fixit's VALID/INVALID, for a repair).

For each ``Example`` of a strategy module: ``mend check`` finds the rule on ``before``; ``mend fix`` (the rule
selected, the example's options) writes exactly ``after``, by this strategy; run eagerly, both give bitwise
equal results (and, for a safe repair, the same printed output); under ``torch.compile`` ``before`` shows the
rule's problem (not one graph without a break) and ``after`` is one graph without a break.
"""

from __future__ import annotations

import contextlib
import io
import pkgutil
import sys
import types
from pathlib import Path
from unittest import mock

import pytest

from mend.analyzers import static
from mend.analyzers.static.config import Config
from mend.rewriter import FixOptions, fix_source
from mend.rewriter import strategies as strategy_package
from mend.rewriter.registry import strategy_module

NAMES = sorted(m.name for m in pkgutil.iter_modules(strategy_package.__path__))
CASES = [pytest.param(name, i, ex, id=f"{name}-{i}") for name in NAMES
         for i, ex in enumerate(strategy_module(name).EXAMPLES)]
PATH = "example.py"  # a loose script: the repair imports its helpers `from _mend import ...`


def test_every_strategy_has_an_example() -> None:
    assert [n for n in NAMES if not strategy_module(n).EXAMPLES] == []


def _fix(example, folder: Path):
    path = str(folder / PATH)
    config = Config()

    def diagnose(text: str) -> list:
        return list(static.check_source(text, path, config))

    options = FixOptions(unsafe=example.unsafe, side_effects=example.side_effects, torch_rng=example.torch_rng,
                         select=(example.rule,))
    return diagnose, fix_source(example.before, path, None, options, diagnose)


@pytest.mark.parametrize("name,i,example", CASES)
def test_example_is_what_mend_fix_writes(name, i, example, tmp_path) -> None:
    diagnose, res = _fix(example, tmp_path)
    assert example.rule in [d.code for d in diagnose(example.before)]
    assert res.error is None
    assert res.applied and all(a.code == example.rule for a in res.applied)
    assert all(a.strategy.split("/")[0] == name for a in res.applied), [a.strategy for a in res.applied]
    assert res.fixed == example.after, res.fixed


def _run(source: str, run: str, compiled: bool):
    """Evaluate ``run`` over ``source``: eagerly (``torch.compile`` does nothing) or compiled, with a stdin of
    "y" lines; the result, the printed output, and Dynamo's graph and graph-break counts."""
    import torch

    counters = torch._dynamo.utils.counters
    torch._dynamo.reset()
    counters.clear()
    module = types.ModuleType("example")  # imported as a module is: a kept message finds its callee through it
    sys.modules[module.__name__] = module
    namespace: dict = module.__dict__
    out = io.StringIO()
    torch.manual_seed(0)
    with contextlib.redirect_stdout(out), contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.object(sys, "stdin", io.StringIO("y\n" * 100)))  # an example may read it
        if compiled:
            namespace["compile"] = lambda m: torch.compile(m, backend="eager")
        else:
            stack.enter_context(mock.patch.object(torch, "compile", lambda m, **kwargs: m))
            namespace["compile"] = lambda m: m
        exec(compile(source, PATH, "exec"), namespace)  # noqa: S102 - the strategy's own example
        result = eval(run, namespace)  # noqa: S307
    return result, out.getvalue(), counters["stats"]["unique_graphs"], sum(counters["graph_break"].values())


def _bitwise(a, b) -> bool:
    import torch

    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and (a.dtype, a.shape, a.stride()) == (b.dtype, b.shape, b.stride()) \
            and torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_bitwise(x, y) for x, y in zip(a, b))
    return type(a) is type(b) and a == b


@pytest.mark.slow
@pytest.mark.parametrize("name,i,example", CASES)
def test_example_removes_the_problem_and_keeps_eager_results(name, i, example) -> None:
    pytest.importorskip("torch")
    before, printed_before, *_ = _run(example.before, example.run, compiled=False)
    after, printed_after, *_ = _run(example.after, example.run, compiled=False)
    assert _bitwise(before, after)
    if not example.unsafe:
        assert printed_before == printed_after
    *_, graphs, breaks = _run(example.before, example.run, compiled=True)
    assert (graphs, breaks) != (1, 0), "the example's `before` compiles to one graph already"
    *_, graphs, breaks = _run(example.after, example.run, compiled=True)
    assert (graphs, breaks) == (1, 0)
