"""The lines of a package that ran: ``sys.settrace`` restricted to the package's files (no torch import).

The zoo runs each row's first eager forward under :class:`LineRecorder`, so a static finding can be
judged on whether the line it names ran at all (a warning under ``if output_attentions:`` that no row
takes is not judged). Frames of other files get no local trace function, so they cost one call event
each and no line events; the decision is cached per code object.

Lines are stored compactly, per file relative to the package, as sorted ``[first, last]`` ranges of
consecutive executed lines (:func:`to_ranges`; :func:`from_ranges` is the inverse).
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterable
from types import CodeType, FrameType
from typing import Any


class LineRecorder:
    """``with LineRecorder(root) as rec: ...`` then ``rec.ranges()``: ``{relpath: [[a, b], ...]}``."""

    def __init__(self, root: str) -> None:
        self.root = os.path.realpath(root) + os.sep
        self._lines: dict[str, set[int]] = {}
        self._codes: dict[CodeType, set[int] | None] = {}  # code -> its file's line set, None: outside
        self._previous: Any = None

    def _lines_of(self, code: CodeType) -> set[int] | None:
        try:
            return self._codes[code]
        except KeyError:
            pass
        path = os.path.realpath(code.co_filename) if code.co_filename.endswith(".py") else ""
        lines = None
        if path.startswith(self.root):
            lines = self._lines.setdefault(path[len(self.root):].replace(os.sep, "/"), set())
        self._codes[code] = lines
        return lines

    def _global(self, frame: FrameType, event: str, arg: Any) -> Any:
        lines = self._lines_of(frame.f_code)
        if lines is None:
            return None
        lines.add(frame.f_lineno)  # the def line (call event): where a frame-level finding may point
        add = lines.add

        def local(frame: FrameType, event: str, arg: Any) -> Any:
            if event == "line":
                add(frame.f_lineno)
            return local

        return local

    def __enter__(self) -> LineRecorder:
        self._previous = sys.gettrace()
        sys.settrace(self._global)
        threading.settrace(self._global)
        return self

    def __exit__(self, *exc: object) -> None:
        sys.settrace(self._previous)
        threading.settrace(self._previous)  # type: ignore[arg-type]

    def ranges(self) -> dict[str, list[list[int]]]:
        return {path: to_ranges(lines) for path, lines in sorted(self._lines.items()) if lines}


def to_ranges(lines: Iterable[int]) -> list[list[int]]:
    """``{3, 4, 5, 9}`` -> ``[[3, 5], [9, 9]]``."""
    out: list[list[int]] = []
    for n in sorted(set(lines)):
        if out and n == out[-1][1] + 1:
            out[-1][1] = n
        else:
            out.append([n, n])
    return out


def from_ranges(ranges: Iterable[Iterable[int]]) -> set[int]:
    return {n for a, b in ranges for n in range(int(a), int(b) + 1)}
