"""Fixing a large file through a window: LibCST sees only the top-level statements a repair can involve.

LibCST parses about ten times slower than ``ast`` and holds many times the memory, and a round of
repairs transforms and prints the whole module. On a 5 MB generated file with a handful of findings,
nearly all of ``mend fix``'s time and memory went into statements that no repair touches. So before
the engine runs, every top-level statement that no repair can involve is replaced by a placeholder: a
string literal spanning exactly the same lines. Line numbers stay the same, so diagnostics, positions
and the engine's re-checks need no translation; after the engine is done each placeholder is replaced by
the original text again.

A statement stays in the window (is parsed by LibCST) when it

* holds a diagnostic, starts on line 1 or 2 (a coding line), or holds the file's first indented block
  (LibCST takes the module's default indent from it);
* imports anything, or names anything a top-level import binds (``torch``, ``F``, ...): repairs add and
  remove imports and look for ``torch.compile`` sites anywhere in the file;
* mentions ``compile`` or ``_mend`` (compile boundaries, helpers, fresh names), or binds ``__all__``;
* shares a line with another statement (``a = 1; b = 2``);
* binds a name read by a statement that stays (followed to a fixed point).

The result is used only when it is exact: every placeholder must come back unchanged and in order, and
no re-check may report a fixable finding inside one; otherwise the file is fixed whole. The engine's
results are the same either way (``tests/rewriter/test_files.py`` compares them on every fixture).
"""

from __future__ import annotations

import ast
import bisect
import io
import re
import secrets
import tokenize
from collections.abc import Sequence
from dataclasses import dataclass

from mend import deadline
from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.engine import Diagnose
from mend.rewriter.options import FixOptions
from mend.rewriter.registry import fix_source, fixable
from mend.rewriter.results import FileResult

ALWAYS_KEEP = ("compile", "_mend")


class _Miss(Exception):
    """The window hid something the engine needs: fix the whole file instead."""


@dataclass
class Window:
    text: str  # the source with placeholders
    nonce: str  # in every placeholder, nowhere else
    placeholders: list[str]
    chunks: list[str]  # the original text of each placeholder

    def expand(self, text: str) -> str:
        """``text`` with every placeholder replaced by its original text (raises :class:`_Miss`)."""
        out: list[str] = []
        pos = 0
        for placeholder, chunk in zip(self.placeholders, self.chunks):
            at = text.find(placeholder, pos)
            if at < 0:
                raise _Miss("a placeholder was changed")
            out += [text[pos:at], chunk]
            pos = at + len(placeholder)
        if text.count(self.nonce) != len(self.placeholders):
            raise _Miss("a placeholder was copied")
        out.append(text[pos:])
        return "".join(out)

    def hidden_lines(self, text: str) -> list[tuple[int, int]]:
        """The (first, last) line of each placeholder in ``text``."""
        spans = []
        pos = 0
        line = 1
        for placeholder in self.placeholders:
            at = text.find(placeholder, pos)
            line += text.count("\n", pos, at)
            spans.append((line, line + placeholder.count("\n") - (1 if placeholder.endswith("\n") else 0)))
            pos = at
        return spans

    def diagnose(self, diagnose: Diagnose) -> Diagnose:
        """``diagnose`` run on the whole text; a fixable finding inside a placeholder raises :class:`_Miss`."""
        def run(text: str) -> list[Diagnostic]:
            found = diagnose(self.expand(text))
            spans = self.hidden_lines(text)  # in order, apart
            firsts = [a for a, _ in spans]
            for d in found:
                k = bisect.bisect_right(firsts, d.line) - 1  # the one placeholder that can hold the line
                if fixable(d.code) and k >= 0 and d.line <= spans[k][1]:
                    raise _Miss(f"a new finding at line {d.line} is outside the window")
            return found

        return run


def fix_windowed(source: str, path: str, diagnostics: Sequence[Diagnostic], options: FixOptions,
                 diagnose: Diagnose | None = None) -> FileResult:
    """:func:`~mend.rewriter.registry.fix_source` through a window (see the module docstring); raises
    :class:`mend.deadline.TooLarge` when the code LibCST would take is more than ``MEND_FIX_MAX_BYTES``."""
    window = build_window(source, diagnostics)
    if window is None:
        deadline.check_size(len(source))
        return fix_source(source, path, diagnostics, options, diagnose)
    deadline.check_size(len(window.text) - sum(map(len, window.placeholders)))
    try:
        result = fix_source(window.text, path, diagnostics, options,
                            window.diagnose(diagnose) if diagnose is not None else None)
        fixed = window.expand(result.fixed)
    except _Miss:
        deadline.check_size(len(source))
        return fix_source(source, path, diagnostics, options, diagnose)
    result.original = source
    result.fixed = fixed
    return result


# --- building the window -------------------------------------------------------------------------

def build_window(source: str, diagnostics: Sequence[Diagnostic]) -> Window | None:
    """The window for ``source``, or None when nothing can be hidden (or the text is not plain)."""
    if "\r" in source.replace("\r\n", ""):
        return None  # a lone CR is a line break to Python: keep line arithmetic simple
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None  # the engine reports it
    nonce = "mend-window-" + secrets.token_hex(8)
    lines = _split_lines(source)
    statements = [_Statement.of(stmt, lines) for stmt in tree.body]
    keep = _kept(statements, diagnostics)
    indent = _first_indent(tree.body, lines)
    if indent is not None:
        keep[indent] = True  # LibCST takes the module's default indent from the first indented block
    runs = _hidden_runs(statements, _close(statements, keep))
    if not runs or nonce in source:
        return None
    out: list[str] = []
    placeholders: list[str] = []
    chunks: list[str] = []
    pos = 0  # the next line (0-based) not yet copied
    for first, last in runs:
        chunk = lines[first - 1:last]
        quote = "'" * 3
        placeholder = (f"{quote}{nonce} {len(placeholders)}" + (_ending(chunk[0]) or "\n") * (last - first)
                       + quote + _ending(chunk[-1]))
        out += lines[pos:first - 1]
        out.append(placeholder)
        placeholders.append(placeholder)
        chunks.append("".join(chunk))
        pos = last
    out += lines[pos:]
    return Window("".join(out), nonce, placeholders, chunks)


@dataclass
class _Statement:
    """What the window needs to know of one top-level statement."""

    first: int  # first line (decorators included)
    last: int
    reads: set[str]  # every name it mentions
    binds: set[str]  # names it binds at module level
    imports: set[str]  # names its imports bind (anywhere inside it)
    always: bool  # mentions a word of ALWAYS_KEEP

    @classmethod
    def of(cls, stmt: ast.stmt, lines: list[str]) -> _Statement:
        decorators = getattr(stmt, "decorator_list", None) or []
        first = min([stmt.lineno] + [d.lineno for d in decorators])
        last = stmt.end_lineno or stmt.lineno
        text = "".join(lines[first - 1:last])
        words = set(_WORD.findall(text))  # every name it reads, and more (strings, comments): keeps more
        imports: set[str] = set()
        if "import" in words:
            for node in ast.walk(stmt):
                if isinstance(node, ast.Import):
                    imports |= {a.asname or a.name.split(".")[0] for a in node.names}
                elif isinstance(node, ast.ImportFrom):
                    imports |= {a.asname or a.name for a in node.names}
        return cls(first, last, words, _binds(stmt, ":=" in text), imports, any(w in text for w in ALWAYS_KEEP))


def _kept(statements: list[_Statement], diagnostics: Sequence[Diagnostic]) -> list[bool]:
    """Which statements stay in the window (the rules in the module docstring)."""
    imported = set().union(*(s.imports for s in statements))
    diag_lines = sorted({ln for d in diagnostics for ln in range(d.line, (d.end_line or d.line) + 1)})
    keep = []
    for i, s in enumerate(statements):
        shared = (i > 0 and statements[i - 1].last >= s.first) or \
            (i + 1 < len(statements) and statements[i + 1].first <= s.last)
        keep.append(i == 0 or s.first <= 2 or shared or s.always or bool(s.imports) or bool(s.reads & imported)
                    or "__all__" in s.binds or _has_line(diag_lines, s.first, s.last))
    return keep


def _close(statements: list[_Statement], keep: list[bool]) -> list[bool]:
    """Also keep every statement that binds a name a kept statement reads, until nothing changes."""
    binders: dict[str, list[int]] = {}
    for i, s in enumerate(statements):
        if not keep[i]:
            for name in s.binds:
                binders.setdefault(name, []).append(i)
    todo = [name for s, kept in zip(statements, keep) if kept for name in s.reads]
    seen: set[str] = set()
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for i in binders.get(name, ()):
            if not keep[i]:
                keep[i] = True
                todo.extend(statements[i].reads)
    return keep


def _first_indent(body: list[ast.stmt], lines: list[str]) -> int | None:
    """The index of the statement holding the file's first INDENT token (None if there is none)."""
    for i, stmt in enumerate(body):
        if not hasattr(stmt, "body") or stmt.end_lineno == stmt.lineno:
            continue
        text = "".join(lines[stmt.lineno - 1:stmt.end_lineno])
        try:
            if any(t.type == tokenize.INDENT for t in tokenize.generate_tokens(io.StringIO(text).readline)):
                return i
        except (tokenize.TokenError, SyntaxError):
            return i
    return None


def _hidden_runs(statements: list[_Statement], keep: list[bool]) -> list[tuple[int, int]]:
    """(first, last) line of each run of consecutive hidden statements, the lines between them included."""
    runs: list[tuple[int, int]] = []
    for i, (s, kept) in enumerate(zip(statements, keep)):
        if kept:
            continue
        if i > 0 and not keep[i - 1]:
            runs[-1] = (runs[-1][0], s.last)
        else:
            runs.append((s.first, s.last))
    return runs


def _has_line(sorted_lines: list[int], first: int, last: int) -> bool:
    i = bisect.bisect_left(sorted_lines, first)
    return i < len(sorted_lines) and sorted_lines[i] <= last


def _binds(stmt: ast.stmt, walrus: bool) -> set[str]:
    """Names a top-level statement binds at module level (not inside its functions or classes).

    Expressions are looked into only when the text has ``:=`` (the one way an expression binds)."""
    out: set[str] = set()
    todo: list[ast.AST] = [stmt]
    while todo:
        node = todo.pop()
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Name):
            if not isinstance(node.ctx, ast.Load):
                out.add(node.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            out |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            out.update(node.names)
        elif isinstance(node, ast.NamedExpr):
            todo.append(node.target)
        elif isinstance(node, ast.expr) and not walrus and not isinstance(node, (ast.Tuple, ast.List, ast.Starred)):
            continue
        elif not isinstance(node, (ast.Lambda, ast.GeneratorExp, ast.ListComp, ast.SetComp, ast.DictComp)):
            for name in (getattr(node, "name", None), getattr(node, "rest", None)):  # except/match captures
                if isinstance(name, str):
                    out.add(name)
            todo.extend(ast.iter_child_nodes(node))
    return out


_WORD = re.compile(r"[^\W\d]\w*")
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\n|\r)|[^\r\n]+\Z")


def _split_lines(text: str) -> list[str]:
    return _LINE.findall(text)


def _ending(line: str) -> str:
    return line[len(line.rstrip("\r\n")):]


__all__ = ["Window", "build_window", "fix_windowed"]
