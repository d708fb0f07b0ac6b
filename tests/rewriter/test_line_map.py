"""``line_map``: repaired lines to the user's, the same as a whole-text ``difflib`` match, without its quadratic
search over the lines the two texts share at their ends."""

from __future__ import annotations

import difflib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mend.rewriter.results import line_map, original_line
from tests.rewriter.conftest import FIXTURES


def _whole(original: str, repaired: str) -> list[int]:
    """The mapping of one ``difflib`` match over the whole texts (the definition ``line_map`` keeps)."""
    old, new = original.splitlines(), repaired.splitlines()
    out: list[int] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        if tag == "equal":
            out += range(i1 + 1, i2 + 1)
        elif tag == "replace":
            out += [i1 + 1 + min(k, i2 - i1 - 1) for k in range(j2 - j1)]
        elif tag == "insert":
            out += [min(i1 + 1, max(len(old), 1))] * (j2 - j1)
    return out


LINES = st.lists(st.sampled_from(["import torch", "x = 1", "    return x", "", "def f(x):", "print(x)"]),
                 max_size=30)


@settings(max_examples=300, deadline=None)
@given(prefix=LINES, middle=LINES, changed=LINES, suffix=LINES)
def test_a_map_in_order_with_the_shared_lines_on_twins(prefix, middle, changed, suffix) -> None:
    original, repaired = "\n".join(prefix + middle + suffix) + "\n", "\n".join(prefix + changed + suffix) + "\n"
    original_lines, repaired_lines = original.splitlines(), repaired.splitlines()
    lines = line_map(original, repaired)
    assert len(lines) == len(repaired.splitlines())
    assert lines == sorted(lines) and all(1 <= n <= max(len(original.splitlines()), 1) for n in lines)
    equal = [a == b for a, b in zip(original_lines, repaired_lines)]
    shared = equal.index(False) if False in equal else len(equal)
    assert lines[:shared] == list(range(1, shared + 1))  # the lines both texts begin with: their twins


@pytest.mark.parametrize("name", sorted(p.name[:-len(".in.py")] for p in FIXTURES.glob("*.in.py")))
def test_the_same_map_as_one_match_over_the_whole_texts_on_the_repairs(name: str) -> None:
    original, repaired = (FIXTURES / f"{name}.in.py").read_text(), (FIXTURES / f"{name}.out.py").read_text()
    assert line_map(original, repaired) == _whole(original, repaired)


def test_a_generated_file_edited_at_both_ends() -> None:
    """A helper import at the top and a repair at the end of 60,000 lines of alike functions: every line of
    the generated part maps to its twin."""
    body = "".join(f"\n\ndef table_{i}(key):\n    if key:\n        return {i}\n    return None\n" for i in range(10_000))
    original = "import torch\n" + body + "\nprint('end')\n"
    repaired = "import torch\nfrom _mend import emit as _mend_emit\n" + body + "\n_mend_emit('end')\n"
    lines = line_map(original, repaired)
    assert len(lines) == len(repaired.splitlines())
    assert lines[:3] == [1, 2, 2]  # the added import maps to the line after it
    assert original_line(lines, 1000) == 999 and original_line(lines, len(lines)) == len(original.splitlines())
