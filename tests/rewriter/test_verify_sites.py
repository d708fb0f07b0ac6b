"""``mend fix --verify`` checks each fix against the break sites both runs recorded: a fix whose site still
breaks, or whose break moved to another line of the function, fails the verdict (a repair that only moves
a break is not a fix)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from mend.rewriter.results import AppliedFix, FileResult
from mend.rewriter.site_check import KEPT, MOVED, NOT_REACHED, REMOVED, Site, outcomes

ORIGINAL = "def f(x):\n    a = one(x)\n    b = two(a)\n    return three(b)\n"
FIXED = "from _mend import h\n\n\ndef f(x):\n    a = h(lambda: one(x))\n    b = two(a)\n    return three(b)\n"


def result(*lines: int) -> FileResult:
    return FileResult("pkg/m.py", ORIGINAL, FIXED, applied=[AppliedFix("MND304", n, 9, "m", "unsafe") for n in lines])


def site(line: int, function: str = "f") -> Site:
    return Site("m.py", line, function, "reason")


def statuses(res: FileResult, before: list[Site], after: list[Site]) -> list[tuple[int, str]]:
    return [(o.line, o.status) for o in outcomes([res], {"pkg/m.py": "m.py"}, before, after)]


def test_a_break_gone_from_the_fixed_line_is_removed_and_repaired_lines_map_back() -> None:
    assert statuses(result(2), [site(2)], []) == [(2, REMOVED)]
    # line 6 of the repaired text is line 3 of the original: a break the original had there is no new one
    assert statuses(result(2), [site(2), site(3)], [site(6)]) == [(2, REMOVED)]


def test_a_break_still_at_the_fixed_line_is_kept() -> None:
    assert statuses(result(2), [site(2)], [site(5)]) == [(2, KEPT)]


def test_a_new_break_further_down_the_function_is_the_fix_moving_it() -> None:
    out = outcomes([result(2)], {"pkg/m.py": "m.py"}, [site(2)], [site(6)])
    assert [(o.status, [(s.path, s.line) for s in o.after]) for o in out] == [(MOVED, [("pkg/m.py", 3)])]
    assert "the break moved to pkg/m.py:3" in out[0].line_text()


def test_a_new_break_in_another_function_is_not_laid_at_the_fix() -> None:
    assert statuses(result(2), [site(2)], [site(6, "g")]) == [(2, REMOVED)]


def test_a_break_moved_out_of_a_comprehension_is_moved() -> None:
    """Python runs a comprehension as a frame of its own (`<listcomp>`): the break the capture of
    `torch.unique` took out of it and `pad_sequence` took over, two lines below in the same `def`, moved."""
    original = ("def f(ids):\n    rows = [unique(t) for t in ids]\n    padded = pad_sequence(rows)\n"
                "    return padded * 2\n")
    fixed = original.replace("[unique(t)", "[h(lambda: unique(t))")
    res = FileResult("pkg/m.py", original, fixed, applied=[AppliedFix("MND304", 2, 13, "m", "unsafe")])
    out = outcomes([res], {"pkg/m.py": "m.py"}, [site(2, "<listcomp>")], [site(3, "f")])
    assert [(o.status, [s.line for s in o.after]) for o in out] == [(MOVED, [3])]
    # a comprehension of another function is not this one
    out = outcomes([res], {"pkg/m.py": "m.py"}, [site(2, "<listcomp>")], [site(3, "g")])
    assert [o.status for o in out] == [REMOVED]


def test_a_fix_whose_line_never_broke_proves_nothing() -> None:
    assert statuses(result(2), [], [site(6)]) == [(2, NOT_REACHED)]


def test_a_moved_break_is_laid_at_the_closest_fix_above_it() -> None:
    # repaired line 7 is the original's line 4, which did not break: the fix at line 3 moved its break there
    assert statuses(result(2, 3), [site(2), site(3)], [site(7)]) == [(2, REMOVED), (3, MOVED)]
    assert statuses(result(3, 4), [site(3), site(4)], [site(5)]) == [(3, MOVED), (4, REMOVED)]  # none above


MODEL = '''import torch


class Net(torch.nn.Module):
    def forward(self, x, ids):
        y = x.sin()
        groups = torch.unique(ids)
        scaled = torch.tensor(y.tolist()) * 2
        return scaled.sum() + groups.sum()
'''

HARNESS = '''import torch

from pkg.model import Net


def harness():
    return Net(), (torch.randn(8), torch.tensor([0, 1, 1, 2, 0, 2, 2, 1])), {}
'''


@pytest.mark.slow
def test_verify_fails_a_fix_whose_site_still_breaks(tmp_path: Path) -> None:
    """The unsafe capture of a float tensor's `.tolist()` (capture helps integer tensors only; the static pass
    does not know the dtype) leaves its line breaking: --verify names it and fails (exit 1), though the
    capture of `torch.unique` removed its break and outputs agree; the safe run applies nothing and passes."""
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "model.py").write_text(MODEL)
    (tmp_path / "harness.py").write_text(HARNESS)
    mend = [sys.executable, "-m", "mend.cli.app", "fix", "--isolated", "--verify", "harness.py:harness"]
    proc = subprocess.run([*mend, "--unsafe-fixes", "pkg"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "verify harness.py:harness: FAIL" in proc.stdout
    assert "fixes and their breaks: 1 removed, 1 kept" in proc.stdout, proc.stdout
    assert "FAIL: pkg/model.py:8 MND303: the repaired code still breaks there: pkg/model.py:8" in proc.stdout
    assert (pkg / "model.py").read_text() == MODEL  # --verify writes nothing
    proc = subprocess.run([*mend, "pkg"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and "verify harness.py:harness: PASS" in proc.stdout, proc.stdout + proc.stderr
