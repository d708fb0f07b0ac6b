"""One parsed file with what the repair strategies read: :class:`FileContext` (no torch import).

The LibCST module, parsed once per round; positions and parents as the strategies ask for them (per
top-level statement: positions over a whole large file are the slowest part of a fix); per-function facts
(:class:`~mend.rewriter.analysis.FunctionFacts`); the modules a relative import names, parsed on demand;
the tests of ``torch.compiler.is_compiling()`` around a node; and the registry of strategies the engine
runs (``ctx.strategies``: what :func:`mend.rewriter.strategy.repair_as` reads).
"""

from __future__ import annotations

import ast
import bisect
import contextlib
import hashlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import libcst as cst
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from mend import deadline
from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import is_compiling_call
from mend.rewriter.analysis import (
    FunctionFacts,
    ImportMap,
    module_attributes,
    range_contains_pos,
    relative_import,
    strip_parens,
)
from mend.rewriter.options import FixOptions
from mend.rewriter.traversal import add_parents, index

Strategies = Mapping[str, Sequence[Any]]  # rule code -> its strategies (mend.rewriter.strategy.Registry)

_SIBLINGS: dict[tuple, FileContext | None] = {}  # (path, sha256 of its bytes) -> the parsed module, for :meth:`FileContext.imported`


_READ: list[list[tuple[str, str]]] = []  # the open :func:`sibling_reads` records


@contextlib.contextmanager
def sibling_reads() -> Iterator[list[tuple[str, str]]]:
    """Record (path, sha256 of the bytes) of every module beside a file that the repairs in the block read:
    a cached repair holds only while they are unchanged (:mod:`mend.rewriter.fix_cache`)."""
    record: list[tuple[str, str]] = []
    _READ.append(record)
    try:
        yield record
    finally:
        _READ.remove(record)


def _sibling(path: str, level: int, module: str, options: FixOptions, strategies: Strategies) -> FileContext | None:
    """The module ``module`` imported ``level`` packages up from the file ``path``, parsed (cached)."""
    base = Path(path).parent
    for _ in range(level - 1):
        base = base.parent
    target = base.joinpath(*module.split(".")).with_suffix(".py")
    try:
        data = target.read_bytes()
        key = (str(target.resolve()), hashlib.sha256(data).hexdigest())
        for record in _READ:
            record.append(key)
        if key not in _SIBLINGS:
            text = data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")  # as read_text reads it
            _SIBLINGS[key] = FileContext(text, str(target), options, strategies)
            _SIBLINGS[key].prepare_all()
        return _SIBLINGS[key]
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, cst.ParserSyntaxError):
        for record in _READ:
            record.append((str(target), ""))  # unreadable now: a cached repair holds while it stays so
        return None


class FileContext:
    """One parsed file with the metadata the strategies need."""

    def __init__(self, source: str, path: str, options: FixOptions, strategies: Strategies | None = None) -> None:
        self.source = source
        self.path = path
        self.options = options
        self.strategies: Strategies = strategies or {}
        self.module = cst.parse_module(source)
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {stmt: self.module for stmt in self.module.body}
        self.positions: dict[cst.CSTNode, Any] = {}
        self._placed: list[tuple[int, int, list]] = []  # per positioned unit: its lines and its nodes' places
        # per kind of unit (top-level, class body): the positioned units' first lines, sorted, and their
        # indexes in ``_placed``; units of one kind do not overlap (None once two would: then every unit is read)
        self._placed_starts: dict[bool, list[int]] | None = {True: [], False: []}
        self._placed_at: dict[bool, list[int]] = {True: [], False: []}
        self._units = _units(self.module, source)
        # top-level statements, and statements of class bodies: each list sorted and without overlaps
        self._unit_lists = [sorted((u for u in self._units if (u[3] == 0) == top), key=lambda u: u[1])
                            for top in (True, False)]
        self._unit_starts = [[u[1] for u in units] for units in self._unit_lists]
        self._resolved: set[int] = set()
        self._unplaceable: set[int] = set()
        self._all_parents = False
        self.imports = ImportMap(self.module)
        self._facts: dict[int, FunctionFacts] = {}
        self._memo: dict[str, Any] = {}
        self._by_type: dict[tuple, list] = {}
        self.counter = _count_mend_names(source)

    # --- positions ----------------------------------------------------------------------------
    def prepare_parents(self, node: cst.CSTNode) -> None:
        """Parents for every node under ``node`` (positions stay limited to prepared units)."""
        add_parents(node, self.parents)

    def prepare_all(self) -> None:
        """Parents for the whole module (for fixes that edit outside their own statement)."""
        if not self._all_parents:
            found = index(self.module)  # walks of any subtree are slices of it from now on
            for node in found.nodes[1:]:  # in visiting order: strategies read the dict's order
                self.parents[node] = found.parents[node]
            self._all_parents = True

    def prepare(self, lines: Iterable[int]) -> None:
        """Resolve positions for the statements holding ``lines`` (1-based).

        PositionProvider over a whole large file is the slowest part of a fix, and repairs only need
        the statements they touch: positions are computed per unit (a top-level statement, or one
        statement of a top-level class body), each rendered alone and shifted to its real place."""
        wanted = sorted(set(lines))
        for ln in wanted:
            deadline.check()  # a file of many findings: the time limit holds here too
            units = self._units_at(ln)
            for unit in sorted(units, key=lambda u: u[2] - u[1]):  # narrowest first
                key = id(unit[0])
                if key in self._unplaceable:
                    continue
                if key in self._resolved or self._resolve_unit(*unit):
                    self._resolved.add(key)
                    break
                self._unplaceable.add(key)  # its columns cannot be shifted: the unit around it, each time
        self._by_type.clear()

    def _units_at(self, line: int) -> list[tuple]:
        """The units holding ``line``: at most a top-level statement and a statement of its class body."""
        out = []
        for units, starts in zip(self._unit_lists, self._unit_starts):
            i = bisect.bisect_right(starts, line) - 1
            if i >= 0 and units[i][1] <= line <= units[i][2]:
                out.append(units[i])
        return out

    def _resolve_unit(self, stmt: cst.CSTNode, start: int, end: int, shift: int,
                      links: tuple[tuple[cst.CSTNode, cst.CSTNode], ...]) -> bool:
        sub = self.module.with_changes(body=[stmt], header=(), footer=())
        local = MetadataWrapper(sub, unsafe_skip_copy=True).resolve(PositionProvider)
        if shift and not _columns_reliable(local):
            return False
        for child, parent in links:
            self.parents[child] = parent
        add_parents(stmt, self.parents)
        offset = start - local[_anchor(stmt)].start.line
        placed: list[tuple[cst.CSTNode, CodeRange]] = []
        for node, rng in local.items():
            if node is sub:
                continue
            placed.append((node, CodeRange(
                CodePosition(rng.start.line + offset, rng.start.column + shift),
                CodePosition(rng.end.line + offset, rng.end.column + shift),
            )))
        self.positions.update(placed)
        self._index_placed(start, end, shift == 0)
        self._placed.append((start, end, placed))
        return True

    def _index_placed(self, start: int, end: int, top: bool) -> None:
        """Add the unit about to be placed at ``len(self._placed)`` to the index :meth:`_candidates` reads."""
        if self._placed_starts is None:
            return
        starts, at = self._placed_starts[top], self._placed_at[top]
        k = bisect.bisect_right(starts, start)
        if (k and self._placed[at[k - 1]][1] >= start) or (k < len(starts) and starts[k] <= end):
            self._placed_starts = None  # units that overlap: not expected, read them all
            return
        starts.insert(k, start)
        at.insert(k, len(self._placed))

    # --- locating -----------------------------------------------------------------------------
    def find(self, types: type | tuple[type, ...], diag: Diagnostic,
             pred: Callable[[cst.CSTNode], bool] | None = None) -> cst.CSTNode | None:
        """The innermost node of ``types`` containing the diagnostic position (else one starting on
        its line)."""
        line, col0 = diag.line, diag.col - 1
        best = None
        best_size = None
        on_line = []
        key = types if isinstance(types, tuple) else (types,)
        for node, rng in self._candidates(key, line):
            if not (rng.start.line <= line <= rng.end.line) or (pred is not None and not pred(node)):
                continue
            if range_contains_pos(rng, line, col0):
                size = (rng.end.line - rng.start.line) * 100000 + (rng.end.column - rng.start.column)
                if best_size is None or size < best_size:
                    best, best_size = node, size
            elif rng.start.line == line:
                on_line.append((rng.start.column, node))
        if best is not None:
            return best
        if on_line:
            return min(on_line, key=lambda t: t[0])[1]
        return None

    def _candidates(self, key: tuple[type, ...], line: int) -> Iterator[tuple[cst.CSTNode, CodeRange]]:
        """The positioned nodes of the types ``key`` in the units holding ``line`` (a node holding a position
        lies in a unit holding its line), in the order they were positioned."""
        if self._placed_starts is None:
            units: Iterable[int] = range(len(self._placed))
        else:  # at most one unit of each kind holds the line
            units = []
            for top, starts in self._placed_starts.items():
                k = bisect.bisect_right(starts, line) - 1
                if k >= 0:
                    units.append(self._placed_at[top][k])
            units.sort()
        for i in units:
            start, end, placed = self._placed[i]
            if start <= line <= end:
                found = self._by_type.get((i, key))
                if found is None:
                    found = self._by_type[(i, key)] = [(n, r) for n, r in placed if isinstance(n, key)]
                yield from found

    def parent(self, node: cst.CSTNode) -> cst.CSTNode | None:
        return self.parents.get(node)

    def memo(self, key: str, compute: Callable[[], Any]) -> Any:
        """``compute()``, once per parsed file (whole-file facts several sites of a round ask for)."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def ancestors(self, node: cst.CSTNode) -> Iterable[cst.CSTNode]:
        cur = self.parents.get(node)
        while cur is not None:
            yield cur
            cur = self.parents.get(cur)

    def enclosing_function(self, node: cst.CSTNode) -> cst.FunctionDef | None:
        for anc in self.ancestors(node):
            if isinstance(anc, cst.FunctionDef):
                return anc
        return None

    def enclosing_class(self, node: cst.CSTNode) -> cst.ClassDef | None:
        for anc in self.ancestors(node):
            if isinstance(anc, cst.ClassDef):
                return anc
        return None

    def facts(self, func: cst.FunctionDef | None) -> FunctionFacts:
        key = id(func)
        if key not in self._facts:
            cls = self.enclosing_class(func) if func is not None else None
            attrs = module_attributes(cls, self.imports) if cls is not None else set()
            self._facts[key] = FunctionFacts(func, self.imports, attrs)
        return self._facts[key]

    def imported(self, name: str) -> tuple[FileContext, str] | None:
        """The parsed module and top-level name that ``from .module import name`` (a relative import at the
        top of this file) binds ``name`` to, read from the file beside this one; None where there is no such
        import or the file cannot be read or parsed. A module is parsed once per process and file version."""
        found = relative_import(self.module, name)
        if found is None:
            return None
        other = _sibling(self.path, found[0], found[1], self.options, self.strategies)
        return (other, found[2]) if other is not None else None

    def statement_line(self, node: cst.CSTNode) -> cst.SimpleStatementLine | None:
        for anc in [node, *self.ancestors(node)]:
            if isinstance(anc, cst.SimpleStatementLine):
                return anc
            if isinstance(anc, cst.BaseCompoundStatement):
                return None
        return None

    def line_of(self, node: cst.CSTNode) -> int:
        return self.positions[node].start.line

    def in_try(self, node: cst.CSTNode) -> bool:
        for anc in self.ancestors(node):
            if isinstance(anc, (cst.Try, cst.TryStar)):
                return True
            if isinstance(anc, cst.FunctionDef):
                return False
        return False

    def in_compile_guard(self, node: cst.CSTNode) -> bool:
        """Inside an ``if not torch.compiler.is_compiling():`` body (or the else of a positive test)."""
        child = node
        for anc in self.ancestors(node):
            if isinstance(anc, cst.If) and _is_compiling_test(anc.test, self.imports) is not None:
                negated = _is_compiling_test(anc.test, self.imports)
                in_body = child is anc.body
                if (negated and in_body) or (not negated and child is not anc.body and child is not anc.test):
                    return True
            if isinstance(anc, cst.IfExp) and _is_compiling_test(anc.test, self.imports) is not None:
                negated = _is_compiling_test(anc.test, self.imports)
                if child is (anc.body if negated else anc.orelse):
                    return True
            if isinstance(anc, cst.FunctionDef):
                return False
            child = anc
        return False

    def eager_only(self, node: cst.CSTNode) -> bool:
        """``node`` runs only in eager: inside a compile guard (:meth:`in_compile_guard`), in the body of an
        ``if``/``x if c else y`` whose test is ``not <is_compiling()> and ...``, or right of such an ``and``."""
        if self.in_compile_guard(node):
            return True
        child = node
        for anc in self.ancestors(node):
            if isinstance(anc, cst.BooleanOperation) and isinstance(anc.operator, cst.And) and child is anc.right:
                if _implies_eager(anc.left, self.imports):
                    return True
            if isinstance(anc, (cst.If, cst.IfExp)) and child is anc.body and _implies_eager(anc.test, self.imports):
                return True
            if isinstance(anc, (cst.FunctionDef, cst.Lambda)):
                return False
            child = anc
        return False

    def torch_name(self) -> tuple[str, list[tuple[str, str | None, str | None]]]:
        """The local name of the torch module and the imports needed to make it available."""
        local = self.imports.local_name_for("torch")
        if local is not None:
            return local, []
        return "torch", [("torch", None, None)]

    def fresh(self, stem: str) -> str:
        self.counter += 1
        return f"_mend_{stem}{self.counter}"


def _anchor(stmt: cst.CSTNode) -> cst.CSTNode:
    decorators = getattr(stmt, "decorators", None)
    if decorators:
        return decorators[0]
    if isinstance(stmt, cst.SimpleStatementLine):
        return stmt.body[0]
    return stmt


def _ast_spans(cst_body: Sequence[cst.CSTNode], ast_body: list) -> list[tuple[cst.CSTNode, int, int, Any]]:
    """Pair libcst statements with Python ast statements (a ``;`` line holds several ast nodes)."""
    out = []
    i = 0
    for stmt in cst_body:
        take = len(stmt.body) if isinstance(stmt, cst.SimpleStatementLine) else 1
        nodes = ast_body[i : i + take]
        i += take
        if not nodes:
            continue
        first = nodes[0]
        decos = getattr(first, "decorator_list", None) or []
        start = min([first.lineno] + [d.lineno for d in decos])
        end = max(getattr(n, "end_lineno", n.lineno) or n.lineno for n in nodes)
        out.append((stmt, start, end, first))
    return out


def _units(module: cst.Module, source: str) -> list[tuple]:
    """Position units: (statement, first line, last line, column shift, parent links)."""
    tree = ast.parse(source)
    out: list[tuple] = []
    for stmt, start, end, node in _ast_spans(module.body, list(tree.body)):
        out.append((stmt, start, end, 0, ((stmt, module),)))
        if isinstance(stmt, cst.ClassDef) and isinstance(stmt.body, cst.IndentedBlock) and \
                isinstance(node, ast.ClassDef):
            indent = stmt.body.indent if stmt.body.indent is not None else module.default_indent
            if "\t" in indent:
                continue
            for inner, s2, e2, _ in _ast_spans(stmt.body.body, list(node.body)):
                links = ((stmt, module), (stmt.body, stmt), (inner, stmt.body))
                out.append((inner, s2, e2, len(indent), links))
    return out


def _columns_reliable(local: Any) -> bool:
    """Shifting columns is exact unless code follows a multi-line string on its last line."""
    ends = set()
    for node, rng in local.items():
        if isinstance(node, (cst.SimpleString, cst.FormattedString, cst.ConcatenatedString)) and \
                rng.end.line > rng.start.line:
            ends.add((rng.end.line, rng.end.column))
    if not ends:
        return True
    end_lines = {ln for ln, _ in ends}
    for node, rng in local.items():
        if rng.start.line in end_lines and any(rng.start.line == ln and rng.start.column >= col
                                               for ln, col in ends):
            return False
    return True


def _count_mend_names(source: str) -> int:
    nums = [int(m) for m in re.findall(r"_mend_[a-z_]+?(\d+)\b", source)]
    return max(nums, default=-1)


def _is_compiling_test(test: cst.BaseExpression, imports: ImportMap) -> bool | None:
    """True for ``not <is_compiling()>`` (also ``not <is_compiling()> or <gate>``, the split of a repair
    that keeps the original for autograd), False for ``<is_compiling()>``, None otherwise."""
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.Or):
        return True if _is_compiling_test(test.left, imports) is True else None
    negated = False
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        negated, test = True, test.expression
    if isinstance(test, cst.Call):
        qual = imports.qualify(test.func)
        if qual and is_compiling_call(qual):
            return negated
    return None


def _implies_eager(test: cst.BaseExpression, imports: ImportMap) -> bool:
    """``test`` is true only in eager: ``not <is_compiling()>``, or an ``and`` with such a part."""
    test = strip_parens(test)
    if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
        return _implies_eager(test.left, imports) or _implies_eager(test.right, imports)
    return _is_compiling_test(test, imports) is True and not isinstance(test, cst.BooleanOperation)


__all__ = ["FileContext", "Strategies"]
