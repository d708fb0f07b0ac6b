"""What fixing a file gives back: :class:`FileResult` with its applied and remaining findings (no torch import)."""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.matching import matching_blocks


@dataclass
class AppliedFix:
    code: str
    line: int
    col: int
    message: str
    applicability: str
    strategy: str = ""  # the strategy that made the repair (rewriter/strategies/<name>.py)
    end_line: int | None = None  # the finding's last line, where it spans several
    keeps_break: str = ""  # the plan's: where the break stays by design (mend.rewriter.plan.Plan.keeps_break)


@dataclass
class Remaining:
    """A diagnostic still present after fixing, and why mend left it."""

    diagnostic: Diagnostic
    reason: str
    unsafe_available: bool = False


@dataclass
class FileResult:
    path: str
    original: str
    fixed: str
    applied: list[AppliedFix] = field(default_factory=list)
    remaining: list[Remaining] = field(default_factory=list)
    error: str | None = None
    helpers: list[str] = field(default_factory=list)  # the ``_mend_*`` helpers the new text imports (mend.rewriter.helper_module)
    # the findings of the new text when the last round of repairs found nothing more to do there (so fixing
    # it again changes nothing: mend.rewriter.fix_cache); None when the rounds ended otherwise
    settled: list[Diagnostic] | None = None

    @property
    def changed(self) -> bool:
        return self.fixed != self.original


def line_map(original: str, repaired: str) -> list[int]:
    """For each line of ``repaired`` (1-based, in order), the line of ``original`` it comes from.

    Equal lines map to their twin; a replaced block maps line by line onto the original block (its extra
    lines onto the block's last line); an inserted line (a guard, an added import) maps to the original
    line that follows it, or the last line at the end of the file. The lines both texts begin and end with
    are twins without a search: only the part between goes through ``difflib``, whose matching is quadratic in
    the lines a text repeats (a generated file of many alike functions); a middle of more than
    :data:`EXACT_LINES` lines is matched with ``difflib``'s junk heuristic."""
    old, new = original.splitlines(), repaired.splitlines()
    head = 0
    while head < min(len(old), len(new)) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(len(old), len(new)) - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    out: list[int] = list(range(1, head + 1))
    a, b = old[head:len(old) - tail], new[head:len(new) - tail]
    matcher = difflib.SequenceMatcher(None, a, b, autojunk=max(len(a), len(b)) > EXACT_LINES)
    matcher.matching_blocks = matching_blocks(matcher)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        i1, i2 = i1 + head, i2 + head
        if tag == "equal":
            out += range(i1 + 1, i2 + 1)
        elif tag == "replace":
            out += [i1 + 1 + min(k, i2 - i1 - 1) for k in range(j2 - j1)]
        elif tag == "insert":
            out += [min(i1 + 1, max(len(old), 1))] * (j2 - j1)
    out += range(len(old) - tail + 1, len(old) + 1)
    return out


EXACT_LINES = 20_000


def original_line(lines: list[int], line: int) -> int:
    """``line`` of a repaired text at its line in the original, through ``lines`` (:func:`line_map`); a line
    past the map stays as it is."""
    return lines[line - 1] if 0 < line <= len(lines) else line


__all__ = ["AppliedFix", "FileResult", "Remaining", "line_map", "original_line"]
