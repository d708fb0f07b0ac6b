"""Did each repair remove its break? Break sites recorded in the original and the repaired run, per fix.

``mend fix --verify`` records where Dynamo broke the graph in both runs (file, line, function, reason;
paths relative to the tree). A repaired file's lines are put back at the original's lines
(:func:`mend.rewriter.results.line_map`), and each applied fix gets one outcome:

* ``removed``: the original broke at the fix's lines, the repaired run does not, and breaks nowhere in the
  same function where the original did not;
* ``kept``: the repaired run still breaks at the fix's lines;
* ``moved``: it no longer breaks there, but breaks at another line of the same function where the original
  did not (a repair that only moves a break is not a fix: the verdict fails); a comprehension or a lambda
  is part of the function it is written in (Python runs it as a frame of its own, ``<listcomp>``: a break
  moved from ``[torch.unique(t) for t in ts]`` to the ``pad_sequence`` of the list below it is moved);
* ``not exercised``: the original run never broke at the fix's lines (the harness does not exercise it, or
  the finding was a prediction that does not break here): nothing is proven either way.

No torch import: the workers send the sites as JSON.
"""

from __future__ import annotations

import ast
import dataclasses
from dataclasses import dataclass

from mend.rewriter.results import FileResult, line_map, original_line

REMOVED, KEPT, MOVED, NOT_REACHED = "removed", "kept", "moved", "not exercised"
FAILING = (KEPT, MOVED)


@dataclass(frozen=True)
class Site:
    """One recorded break: ``path`` relative to the tree, ``line`` in that file as it ran."""

    path: str
    line: int
    function: str
    reason: str
    text: str = ""

    @classmethod
    def from_dict(cls, data: dict) -> Site:
        return cls(str(data["path"]), int(data["line"]), str(data.get("function", "")),
                   str(data.get("reason", "")), str(data.get("text", "")))

    def shown(self) -> str:
        text = f" `{self.text}`" if self.text else ""
        return f"{self.path}:{self.line}{text} ({self.reason})" if self.reason else f"{self.path}:{self.line}{text}"


@dataclass(frozen=True)
class Outcome:
    """What became of one applied fix's break."""

    path: str
    line: int
    code: str
    status: str
    after: tuple[Site, ...] = ()  # the repaired run's breaks that make it kept or moved

    def line_text(self) -> str:
        where = f"{self.path}:{self.line} {self.code}"
        if self.status == KEPT:
            return f"{where}: the repaired code still breaks there: {self.after[0].shown()}"
        if self.status == MOVED:
            return f"{where}: the break moved to {', '.join(s.shown() for s in self.after)}"
        if self.status == REMOVED:
            return f"{where}: break removed"
        return f"{where}: the original run did not break there (not exercised by the harness)"


def outcomes(results: list[FileResult], rel: dict[str, str], before: list[Site], after: list[Site]) -> list[Outcome]:
    """One :class:`Outcome` per applied fix of ``results`` (``rel``: a result's path -> its path relative to the
    tree, as the sites are), ``before``/``after`` the sites of the original and the repaired run. Outcomes
    and their sites carry the result's path (as the user gave it) and the original file's lines."""
    out: list[Outcome] = []
    for res in results:
        path = rel.get(res.path)
        if path is None or not res.applied:
            continue
        lines = line_map(res.original, res.fixed)  # sites shown at the user's path, the original's lines
        scope = _functions(res.original)
        was = [_in_function(Site(res.path, s.line, s.function, s.reason, s.text), scope)
               for s in before if s.path == path]
        now = [_in_function(Site(res.path, original_line(lines, s.line), s.function, s.reason, s.text), scope)
               for s in after if s.path == path]
        out += _file_outcomes(res.path, [(f.code, f.line, f.end_line or f.line) for f in res.applied], was, now)
    return out


def _functions(source: str) -> list[tuple[int, int, str]]:
    """(first line, last line, name) of each ``def`` of ``source``, inner ones after outer ones; none when it
    does not parse."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    return [(min([n.lineno] + [d.lineno for d in n.decorator_list]), n.end_lineno or n.lineno, n.name)
            for n in sorted(defs, key=lambda n: n.lineno)]


def _in_function(site: Site, scope: list[tuple[int, int, str]]) -> Site:
    """``site`` with a comprehension's or a lambda's frame (``<listcomp>``) named by the ``def`` around its line."""
    if not site.function.startswith("<"):
        return site
    names = [name for first, last, name in scope if first <= site.line <= last]
    return dataclasses.replace(site, function=names[-1]) if names else site


def _file_outcomes(path: str, fixes: list[tuple[str, int, int]], was: list[Site], now: list[Site]) -> list[Outcome]:
    """The outcomes of one file's fixes (code, first line, last line). A break of the repaired run at a line
    of a function where the original did not break there is laid at the fix of that function whose break
    went, closest above it (else the first one below): that fix moved it."""
    status: dict[int, tuple[str, tuple[Site, ...], set[str]]] = {}
    for i, (_, first, last) in enumerate(fixes):
        broke = [s for s in was if first <= s.line <= last]
        still = tuple(s for s in now if first <= s.line <= last)
        status[i] = (NOT_REACHED, (), set()) if not broke else (KEPT, still, set()) if still else \
            (REMOVED, (), {s.function for s in broke})
    old_lines = {s.line for s in was}
    moved: dict[int, list[Site]] = {}
    for site in now:
        if site.line in old_lines:
            continue
        gone = [i for i, (st, _, funcs) in status.items() if st == REMOVED and site.function in funcs]
        if gone:
            above = [i for i in gone if fixes[i][1] <= site.line]
            owner = max(above, key=lambda i: fixes[i][1]) if above else min(gone, key=lambda i: fixes[i][1])
            moved.setdefault(owner, []).append(site)
    return [Outcome(path, first, code, MOVED, tuple(moved[i])) if i in moved else
            Outcome(path, first, code, status[i][0], status[i][1]) for i, (code, first, _) in enumerate(fixes)]


__all__ = ["FAILING", "KEPT", "MOVED", "NOT_REACHED", "REMOVED", "Outcome", "Site", "outcomes"]
