"""``mend.rewriter.matching``: the blocks and the unified diff ``difflib`` gives, without a search of the whole
remaining range for each block (a file of many alike functions, each repaired alike)."""

from __future__ import annotations

import difflib

from hypothesis import given, settings
from hypothesis import strategies as st

from mend.rewriter import matching
from mend.rewriter.matching import matching_blocks, unified_diff
from mend.rewriter.results import line_map

LINES = st.lists(st.integers(0, 5), max_size=40)
EDITS = st.lists(st.tuples(st.integers(0, 40), st.integers(0, 3), st.lists(st.integers(0, 7), max_size=4)),
                 max_size=6)


def _edited(a: list[int], edits: list[tuple[int, int, list[int]]]) -> list[int]:
    b = list(a)
    for at, drop, new in edits:
        b[at:at + drop] = new
    return b


def _blocks(a: list, b: list, autojunk: bool) -> tuple[list, list]:
    ours = matching_blocks(difflib.SequenceMatcher(None, a, b, autojunk=autojunk))
    return [tuple(m) for m in ours], [tuple(m) for m in difflib.SequenceMatcher(None, a, b, autojunk=autojunk)
                                      .get_matching_blocks()]


@settings(max_examples=400, deadline=None)
@given(a=LINES, edits=EDITS, other=LINES)
def test_the_blocks_of_difflib(a: list[int], edits: list, other: list[int]) -> None:
    for b in (_edited(a, edits), other):
        for autojunk in (False, True):
            ours, theirs = _blocks(a, b, autojunk)
            assert ours == theirs


@settings(max_examples=60, deadline=None)
@given(a=st.lists(st.integers(0, 40), min_size=200, max_size=400), edits=EDITS)
def test_the_blocks_of_difflib_with_its_popular_lines_left_out(a: list[int], edits: list) -> None:
    """Past 200 lines ``autojunk`` leaves lines out of the search that more than 1% of them are; a block grows
    over them after."""
    b = _edited(a, [(at * 5, drop, new) for at, drop, new in edits])
    ours, theirs = _blocks(a, b, True)
    assert ours == theirs


@settings(max_examples=300, deadline=None)
@given(a=LINES, edits=EDITS)
def test_the_unified_diff_of_difflib(a: list[int], edits: list) -> None:
    old = [f"{n}\n" for n in a]
    new = [f"{n}\n" for n in _edited(a, edits)] + ["last"]  # a last line without its end, as a file may have
    for context in (0, 3):
        assert list(unified_diff(old, new, "a/x.py", "b/x.py", n=context)) == \
            list(difflib.unified_diff(old, new, fromfile="a/x.py", tofile="b/x.py", n=context))


def _generated(count: int) -> tuple[str, str]:
    """A generated file of alike compiled functions and the same with each print repaired alike."""
    original = "import torch\n" + "".join(
        f"\n\n@torch.compile\ndef step_{i}(x):\n    y = x.sin() + {i}\n    print('step {i}', y.shape)\n"
        f"    return y.cos()\n" for i in range(count))
    repaired = original.replace("import torch\n", "import torch\nfrom _mend import emit as _mend_emit\n", 1)
    for i in range(count):
        repaired = repaired.replace(
            f"    print('step {i}', y.shape)\n",
            f"    if not torch.compiler.is_compiling():\n        print('step {i}', y.shape)\n    else:\n"
            f"        _mend_emit(__name__, 'print', 'step {i}', y)\n")
    return original, repaired


def test_alike_repairs_are_searched_once(monkeypatch) -> None:  # noqa: ANN001
    """Each repair's block is as long as the others: ``difflib`` takes the first and searches everything right
    of it again (a 0.1 MB generated file took 340 s); here the first search's blocks serve the ranges after it,
    so the lines searched stay a few times the file's, and the map is ``difflib``'s."""
    original, repaired = _generated(400)
    searched: list[int] = []
    real = matching._longest

    def counted(a, b2j, alo, ahi, blo, bhi):  # noqa: ANN001, ANN202
        searched.append(ahi - alo)
        return real(a, b2j, alo, ahi, blo, bhi)

    monkeypatch.setattr(matching, "_longest", counted)
    old = original.splitlines()
    assert sum(searched) == 0 and line_map(original, repaired)
    assert sum(searched) < 3 * len(old), (len(searched), sum(searched))


def test_alike_repairs_map_as_difflib_does() -> None:
    original, repaired = _generated(60)
    old, new = original.splitlines(), repaired.splitlines()
    for autojunk in (False, True):
        ours, theirs = _blocks(old, new, autojunk)
        assert ours == theirs
