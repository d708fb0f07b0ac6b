"""A site mend leaves is reported with what its code does: the value a condition reads and what mend knows of
it, the slice that reads a tensor as a number (repaired as the slice bound it is), the comprehension a
test filters. Runtime sites (``mend fix --from-run``) reach the same strategies as static ones."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mend.analyzers.runtime import data as rd
from mend.analyzers.runtime.mapping import code_for_break
from mend.rewriter import FixOptions, fix_source
from tests.rewriter.conftest import diag


def _remaining(src: str, code: str, line: int) -> str:
    src = textwrap.dedent(src).lstrip("\n")
    col = len(src.splitlines()[line - 1]) - len(src.splitlines()[line - 1].lstrip()) + 1
    res = fix_source(src, "t.py", [diag(code, line, col)], FixOptions(unsafe=True))
    assert res.fixed == src and len(res.remaining) == 1
    return res.remaining[0].reason


def test_an_item_in_a_condition_names_the_value_mend_cannot_tell_is_a_tensor() -> None:
    reason = _remaining("""
        import torch
        class M(torch.nn.Module):
            def forward(self, x, n):
                if n.item() > 0:
                    x = x + 1
                return x
        """, "MND301", 4)
    assert reason.startswith("the condition `n.item() > 0` reads no value mend knows to be a tensor: `n` is a "
                             "parameter without a `torch.Tensor` annotation"), reason
    assert "NumPy's values have `.item()` too" in reason


def test_a_condition_names_a_name_assigned_other_values() -> None:
    reason = _remaining("""
        import torch
        def f(x: torch.Tensor, p, looping):
            stop = False
            if p:
                stop = x.sum() > p
            if looping and stop:
                return x
            return x * 2
        """, "MND201", 6)
    assert "`looping and stop` reads no value mend knows to be a tensor" in reason
    assert "`stop` is also assigned `False`" in reason, reason


def test_a_number_read_by_a_slice_says_so() -> None:
    reason = _remaining("""
        import torch
        def f(x: torch.Tensor, counts: torch.Tensor):
            n = counts.sum()
            return x[:n] * 2
        """, "MND302", 4)
    assert reason.startswith("the slice `x[:n]` reads a tensor bound as a Python number"), reason
    assert "math" not in reason


def test_math_of_a_tensor_names_the_call() -> None:
    reason = _remaining("""
        import math
        import torch
        def f(x: torch.Tensor):
            return x * math.sqrt(x.var())
        """, "MND302", 4)
    assert reason.startswith("`math.sqrt(x.var())` turns the tensor into a Python number for `math.sqrt`"), reason


def test_a_comprehension_filter_is_named() -> None:
    reason = _remaining("""
        import torch
        def f(x: torch.Tensor, xs: list):
            ys = [v * 2 for v in xs if x.sum() > 0]
            return ys
        """, "MND201", 3)
    assert reason.startswith("the test `x.sum() > 0` filters the elements of `[v * 2 for v in xs if x.sum() > 0]`"
                             ), reason


def test_a_slice_break_recorded_at_run_time_is_the_slice_bound_rule() -> None:
    site = rd.BreakSite("m.py", 3, "f", "Unsupported Tensor.item() call", "GB0124", "…",
                        source_line="return x[:n] * 2")
    assert code_for_break(site) == "MND311"
    for line, code in (("y = y * float(x[:n].sum())", "MND302"), ("m = x[:2].sum().item()", "MND301"),
                       ("y = math.sqrt(x[1:].sum())", "MND302")):
        site.source_line = line
        assert code_for_break(site) == code, line


PROGRAM = """\
import torch


def first(x, counts):
    n = counts.sum()
    return x[:n] * 2


def kept(x, xs):
    ys = [v * 2 for v in xs if x.sum() > 0]
    return ys


print(torch.compile(first, backend="eager")(torch.arange(10.0), torch.tensor([1, 2])))
print(torch.compile(kept, backend="eager")(torch.ones(3), [torch.ones(2), torch.zeros(2)]))
"""


@pytest.mark.slow
def test_runtime_sites_get_their_rule_and_reason(tmp_path: Path) -> None:
    """`mend run` records a break at the slice (GB0124, no `.item()` on the line) and one at the comprehension's
    filter (GB0170); `mend fix --from-run` captures the slice bound (MND311) and names the filter."""
    (tmp_path / "prog.py").write_text(PROGRAM)
    mend = [sys.executable, "-m", "mend.cli.app"]
    run = subprocess.run([*mend, "run", "-q", "--data-file", "run.json", "prog.py"], cwd=tmp_path,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stdout + run.stderr
    fix = [*mend, "fix", "--isolated", "--diff", "--from-run", "run.json", "prog.py"]
    out = subprocess.run(fix, cwd=tmp_path, capture_output=True, text=True, timeout=600).stdout
    assert ("prog.py:6:5: MND311 not fixed: unsafe fix available with --unsafe-fixes: capture the value for this "
            "expression only under compile") in out, out
    assert ("prog.py:10:5: MND201 not fixed: the test `x.sum() > 0` filters the elements of "
            "`[v * 2 for v in xs if x.sum() > 0]`") in out, out
    assert "math.*" not in out and "could not find" not in out
    out = subprocess.run([*fix[:4], "--unsafe-fixes", *fix[4:]], cwd=tmp_path, capture_output=True, text=True,
                         timeout=600).stdout
    assert "+    return _mend_captured(lambda: x[:n]) * 2" in out, out


def test_a_logger_question_is_found_and_left_with_its_reason(tmp_path: Path) -> None:
    """``if logger.isEnabledFor(...)`` breaks the graph (a Logger method Dynamo does not trace): check reports it,
    fix leaves it and says why (its answer decides code; there is no message to keep)."""
    from mend.analyzers import static

    src = textwrap.dedent("""
        import logging

        import torch
        from torch import nn

        logger = logging.getLogger(__name__)


        class M(nn.Module):
            def forward(self, x):
                if logger.isEnabledFor(logging.INFO):
                    x = x + 1
                return x * 2
        """).lstrip("\n")
    (tmp_path / "m.py").write_text(src)
    found = [d for d in static.check_paths([tmp_path], static.Config(root=tmp_path), jobs=1, use_cache=False).diagnostics]
    assert [(d.code, d.line) for d in found] == [("MND102", 11)] and "isEnabledFor" in found[0].message
    res = fix_source(src, "t.py", [diag("MND102", 11, found[0].col)], FixOptions(unsafe=True))
    assert res.fixed == src and len(res.remaining) == 1
    assert res.remaining[0].reason.startswith("`.isEnabledFor()` asks about the logger's configuration"), res.remaining
