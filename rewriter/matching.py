"""Line matching as ``difflib`` does it, without its quadratic searches: :func:`matching_blocks` (what
:func:`mend.rewriter.results.line_map` reads) and :func:`unified_diff` (``mend fix --diff``), the same results."""

from __future__ import annotations

import bisect
import difflib
from collections.abc import Iterator


def matching_blocks(matcher: difflib.SequenceMatcher) -> list[difflib.Match]:
    """``matcher.get_matching_blocks()`` (a matcher without ``isjunk``), the same list, found faster.

    ``difflib`` takes the longest block of the two texts (the first in ``a``, then in ``b``, of those as long),
    then does the same left and right of it; each search runs over every pair of equal lines in its range.
    In a file of many alike functions each repaired alike, the blocks are as long as one another, the first
    is taken each time and the range right of it is searched again: quadratic, and more in the lines the
    texts repeat (a 0.1 MB generated file took 340 s). Here a search keeps every block of its longest size, in
    ``difflib``'s order: a range inside the searched one has no longer block, so its block is the first of
    those that lies inside it, if any; only a range without one is searched. A range left of a block
    holds none of them (the block was the first), so it is searched."""
    a, b, b2j = matcher.a, matcher.b, matcher.b2j
    queue: list[tuple[int, int, int, int, tuple[int, list[tuple[int, int]]] | None, int]] = \
        [(0, len(a), 0, len(b), None, 0)]
    found: list[tuple[int, int, int]] = []
    while queue:
        alo, ahi, blo, bhi, known, start = queue.pop()
        at = -1
        if known is not None:
            size, blocks = known
            for n in range(start, len(blocks) if size else 0):
                i, j = blocks[n]
                if i + size > ahi:
                    break
                if i >= alo and blo <= j and j + size <= bhi:
                    at = n
                    break
        if at < 0 and (known is None or known[0]):
            known = _longest(a, b2j, alo, ahi, blo, bhi)
            at = 0
        size, blocks = known
        i, j, k = (*blocks[at], size) if size else (alo, blo, 0)
        # as difflib: the block grows over equal lines that are not in ``b2j`` (autojunk's popular lines)
        while i > alo and j > blo and a[i - 1] == b[j - 1]:
            i, j, k = i - 1, j - 1, k + 1
        while i + k < ahi and j + k < bhi and a[i + k] == b[j + k]:
            k += 1
        if not k:
            continue
        found.append((i, j, k))
        if alo < i and blo < j:
            queue.append((alo, i, blo, j, None, 0))
        if i + k < ahi and j + k < bhi:
            queue.append((i + k, ahi, j + k, bhi, known, at + 1))
    found.sort()
    merged: list[tuple[int, int, int]] = []
    i1 = j1 = k1 = 0
    for i2, j2, k2 in found:  # adjacent blocks as one, as difflib gives them
        if i1 + k1 == i2 and j1 + k1 == j2:
            k1 += k2
        else:
            if k1:
                merged.append((i1, j1, k1))
            i1, j1, k1 = i2, j2, k2
    if k1:
        merged.append((i1, j1, k1))
    merged.append((len(a), len(b), 0))
    return [difflib.Match(*m) for m in merged]


def _longest(a: list, b2j: dict, alo: int, ahi: int, blo: int, bhi: int) -> tuple[int, list[tuple[int, int]]]:
    """The size of the longest blocks of ``a[alo:ahi]`` and ``b[blo:bhi]`` made of lines in ``b2j`` and where
    each begins, in ``difflib.SequenceMatcher.find_longest_match``'s order (by ``a``, then ``b``); (0, []) if
    none."""
    best = 0
    starts: list[tuple[int, int]] = []
    j2len: dict[int, int] = {}
    for i in range(alo, ahi):
        where = b2j.get(a[i])
        new: dict[int, int] = {}
        if where:
            get = j2len.get
            for n in range(bisect.bisect_left(where, blo) if where[0] < blo else 0, len(where)):
                j = where[n]
                if j >= bhi:
                    break
                k = new[j] = get(j - 1, 0) + 1
                if k >= best:
                    if k > best:
                        best, starts = k, []
                    starts.append((i - k + 1, j - k + 1))
        j2len = new
    return best, starts


def unified_diff(a: list[str], b: list[str], fromfile: str, tofile: str, n: int = 3) -> Iterator[str]:
    """``difflib.unified_diff(a, b, fromfile, tofile, n=n)``: the same lines, its blocks from
    :func:`matching_blocks`."""
    matcher = difflib.SequenceMatcher(None, a, b)
    matcher.matching_blocks = matching_blocks(matcher)
    started = False
    for group in matcher.get_grouped_opcodes(n):
        if not started:
            started = True
            yield f"--- {fromfile}\n"
            yield f"+++ {tofile}\n"
        first, last = group[0], group[-1]
        yield f"@@ -{_range(first[1], last[2])} +{_range(first[3], last[4])} @@\n"
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                for line in a[i1:i2]:
                    yield " " + line
                continue
            if tag in {"replace", "delete"}:
                for line in a[i1:i2]:
                    yield "-" + line
            if tag in {"replace", "insert"}:
                for line in b[j1:j2]:
                    yield "+" + line


def _range(start: int, stop: int) -> str:
    """A hunk's range as ``difflib`` writes it: the first line and the count (1-based; the line before an
    empty range)."""
    beginning, length = start + 1, stop - start
    if length == 1:
        return f"{beginning}"
    if not length:
        beginning -= 1
    return f"{beginning},{length}"


__all__ = ["matching_blocks", "unified_diff"]
