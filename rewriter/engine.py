"""The fix engine: diagnostics in, repaired source out (no torch import).

One round: parse the file once (positions and parents as LibCST metadata), ask the fixer of each
diagnostic's code for a :class:`Plan` (replacement nodes, imports, helpers) or a :class:`Decline`
(with the reason), apply every non-overlapping plan in one transformer pass, add imports with
``AddImportsVisitor``, and check that the result parses and compiles. Then re-diagnose the new
source and repeat until nothing more changes (at most ``max_rounds``). A round whose output would not
parse is discarded: the file keeps the last good text and the failure is reported.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable, Sequence  # noqa: F401
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor
from libcst.metadata import CodePosition, CodeRange, MetadataWrapper, PositionProvider

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.rules import rule_for
from mend.analyzers.static.torch_facts import is_compiling_call
from mend.rewriter.analysis import (
    FunctionFacts,
    ImportMap,
    add_parents,
    dotted,
    range_contains_pos,
    relative_import,
    strip_parens,
    walk,
)

SIDE_EFFECT_POLICIES = ("keep", "guard", "defer", "drop")
_SIBLINGS: dict[tuple, FileContext | None] = {}  # (path, mtime, size) -> the parsed module, for :meth:`FileContext.imported`


@dataclass
class FixOptions:
    """What ``mend fix`` may do. ``side_effects`` is the family-1 policy (``[tool.mend] side-effects``)."""

    unsafe: bool = False
    side_effects: str = "keep"
    torch_rng: bool = False
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    max_rounds: int = 4

    def __post_init__(self) -> None:
        if self.side_effects not in SIDE_EFFECT_POLICIES:
            raise ValueError(
                f"side-effects policy must be one of {', '.join(SIDE_EFFECT_POLICIES)}, "
                f"got {self.side_effects!r}"
            )

    def wants(self, code: str) -> bool:
        if self.select and not any(code.startswith(s) for s in self.select):
            return False
        return not any(code.startswith(s) for s in self.ignore)


@dataclass
class Plan:
    """A proven repair: replace each ``edits`` node (by identity) with its replacement."""

    diagnostic: Diagnostic
    message: str
    applicability: str  # "safe" | "unsafe"
    edits: list[tuple[cst.CSTNode, Any]]
    imports: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    helpers: list[str] = field(default_factory=list)
    drop_imports: list[str] = field(default_factory=list)  # modules whose import may now be unused
    # a generic repair (capture for one site): any specific repair whose edits overlap it goes first
    fallback: bool = False


@dataclass
class Decline:
    diagnostic: Diagnostic
    reason: str
    unsafe_available: bool = False


@dataclass
class AppliedFix:
    code: str
    line: int
    col: int
    message: str
    applicability: str


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

    @property
    def changed(self) -> bool:
        return self.fixed != self.original


def _sibling(path: str, level: int, module: str, options: FixOptions) -> FileContext | None:
    """The module ``module`` imported ``level`` packages up from the file ``path``, parsed (cached)."""
    base = Path(path).parent
    for _ in range(level - 1):
        base = base.parent
    target = base.joinpath(*module.split(".")).with_suffix(".py")
    try:
        stat = target.stat()
        key = (str(target.resolve()), stat.st_mtime_ns, stat.st_size)
        if key not in _SIBLINGS:
            _SIBLINGS[key] = FileContext(target.read_text(encoding="utf-8"), str(target), options)
            _SIBLINGS[key].prepare_all()
        return _SIBLINGS[key]
    except (OSError, UnicodeDecodeError, SyntaxError, ValueError, cst.ParserSyntaxError):
        return None


class FileContext:
    """One parsed file with the metadata the fixers need."""

    def __init__(self, source: str, path: str, options: FixOptions) -> None:
        self.source = source
        self.path = path
        self.options = options
        self.module = cst.parse_module(source)
        self.parents: dict[cst.CSTNode, cst.CSTNode] = {stmt: self.module for stmt in self.module.body}
        self.positions: dict[cst.CSTNode, Any] = {}
        self._units = _units(self.module, source)
        self._resolved: set[int] = set()
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
            add_parents(self.module, self.parents)
            self._all_parents = True

    def prepare(self, lines: Iterable[int]) -> None:
        """Resolve positions for the statements holding ``lines`` (1-based).

        PositionProvider over a whole large file is the slowest part of a fix, and repairs only need
        the statements they touch: positions are computed per unit (a top-level statement, or one
        statement of a top-level class body), each rendered alone and shifted to its real place."""
        wanted = sorted(set(lines))
        for ln in wanted:
            units = [u for u in self._units if u[1] <= ln <= u[2]]
            for unit in sorted(units, key=lambda u: u[2] - u[1]):  # narrowest first
                key = id(unit[0])
                if key in self._resolved or self._resolve_unit(*unit):
                    self._resolved.add(key)
                    break
        self._by_type.clear()

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
        for node, rng in local.items():
            if node is sub:
                continue
            self.positions[node] = CodeRange(
                CodePosition(rng.start.line + offset, rng.start.column + shift),
                CodePosition(rng.end.line + offset, rng.end.column + shift),
            )
        return True

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
        candidates = self._by_type.get(key)
        if candidates is None:
            candidates = [(n, r) for n, r in self.positions.items() if isinstance(n, key)]
            self._by_type[key] = candidates
        for node, rng in candidates:
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
            from mend.rewriter.analysis import module_attributes

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
        other = _sibling(self.path, found[0], found[1], self.options)
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
    import ast

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
    import re

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


Diagnose = Callable[[str], list[Diagnostic]]


def no_fix_reason(code: str) -> str:
    """Why ``mend fix`` leaves a finding of ``code`` that has no fixer (the rule's ``no_fix``, if it says)."""
    rule = rule_for(code)
    return (rule.no_fix if rule is not None else "") or "no automatic fix for this rule"


def _overlaps(a: cst.CSTNode, b: cst.CSTNode, ctx: FileContext) -> bool:
    ra, rb = ctx.positions.get(a), ctx.positions.get(b)
    if ra is None or rb is None:
        return a is b
    a0, a1 = (ra.start.line, ra.start.column), (ra.end.line, ra.end.column)
    b0, b1 = (rb.start.line, rb.start.column), (rb.end.line, rb.end.column)
    return a0 < b1 and b0 < a1


def _same_nodes(a: list, b: list) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


class _Apply(cst.CSTTransformer):
    def __init__(self, replacements: dict[int, Any]) -> None:
        super().__init__()
        self.replacements = replacements

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode) -> Any:
        repl = self.replacements.get(id(original_node))
        if repl is None:
            return updated_node
        return repl(updated_node) if callable(repl) else repl


def _take(ctx: FileContext, result: Plan, plans: list[Plan], taken: list[cst.CSTNode],
          postponed: list[Diagnostic]) -> None:
    """Add ``result`` to this round's plans unless its edits overlap one already taken (then its site
    waits for the next round, on the repaired text)."""
    targets = [node for node, repl in result.edits if not callable(repl)]
    same = [p for p in plans if targets and _same_nodes([n for n, r in p.edits if not callable(r)], targets)]
    if same:  # the same repair already covers this site (e.g. a time call inside a guarded print)
        plans.append(Plan(result.diagnostic, same[0].message, same[0].applicability, []))
        return
    if any(_overlaps(t, other, ctx) for t in targets for other in taken):
        postponed.append(result.diagnostic)
        return
    taken.extend(targets)
    plans.append(result)


def plan_round(ctx: FileContext, diagnostics: Sequence[Diagnostic]) -> tuple[list[Plan], list[Decline], list[Diagnostic]]:
    """Plans for every diagnostic whose fix is proven, declines with reasons, and postponed sites."""
    from mend.rewriter.fixes import fixer_for  # the fix modules import this one

    plans: list[Plan] = []
    declines: list[Decline] = []
    postponed: list[Diagnostic] = []
    taken: list[cst.CSTNode] = []
    ctx.prepare(d.line for d in diagnostics if fixer_for(d.code) is not None)
    fallbacks: list[Plan] = []
    for diag in sorted(diagnostics, key=lambda d: (d.line, d.col, d.code)):
        fixer = fixer_for(diag.code)
        if fixer is None:
            declines.append(Decline(diag, no_fix_reason(diag.code)))
            continue
        try:
            result = fixer(ctx, diag)
        except Exception as exc:  # a fixer bug must not lose the file: decline and say so
            declines.append(Decline(diag, f"internal error in the {diag.code} fix: {type(exc).__name__}: {exc}"))
            continue
        if isinstance(result, Decline):
            declines.append(result)
        elif result.applicability == "unsafe" and not ctx.options.unsafe:
            declines.append(Decline(diag, f"unsafe fix available with --unsafe-fixes: {result.message}",
                                    unsafe_available=True))
        elif result.fallback:
            fallbacks.append(result)
        else:
            _take(ctx, result, plans, taken, postponed)
    for result in fallbacks:
        _take(ctx, result, plans, taken, postponed)
    return plans, declines, postponed


def apply_plans(ctx: FileContext, plans: Sequence[Plan]) -> str:
    from mend.rewriter.helpers import insert_helpers

    replacements: dict[int, Any] = {}
    imports: list[tuple[str, str | None, str | None]] = []
    helpers: list[str] = []
    for plan in plans:
        for node, repl in plan.edits:
            prev = replacements.get(id(node))
            if prev is not None and callable(prev) and callable(repl):
                replacements[id(node)] = (lambda a, b: (lambda upd: b(a(upd))))(prev, repl)
            else:
                replacements[id(node)] = repl
        imports.extend(plan.imports)
        helpers.extend(plan.helpers)
    module = ctx.module.visit(_Apply(replacements))
    assert isinstance(module, cst.Module)
    if imports:
        context = CodemodContext()
        for mod, obj, asname in dict.fromkeys(imports):
            AddImportsVisitor.add_needed_import(context, mod, obj, asname)
        module = AddImportsVisitor(context).transform_module(module)
    drops = [m for plan in plans for m in plan.drop_imports]
    if drops:
        context = CodemodContext()
        for mod in dict.fromkeys(drops):
            RemoveImportsVisitor.remove_unused_import(context, mod)
        module = RemoveImportsVisitor(context).transform_module(module)
    if helpers:
        module = insert_helpers(module, list(dict.fromkeys(helpers)))
    return module.code


def _validate(text: str, path: str, original: str) -> str | None:
    try:
        compile(text, path, "exec", dont_inherit=True)
    except (cst.ParserSyntaxError, SyntaxError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    early = _reads_before_binding(text) - _reads_before_binding(original)
    if early:
        func, name = sorted(early)[0]
        return f"`{name}` would be read in {func}() before the function binds it itself (UnboundLocalError)"
    return None


def _reads_before_binding(text: str) -> set[tuple[str, str]]:
    """(function, name) where a function reads a name on a line before its own first binding of it: the
    name is local to the whole function, so the read raises UnboundLocalError (code mend writes reads
    ``torch``, which a function may import itself further down)."""
    out = set()
    for fn in ast.walk(ast.parse(text)):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        a = fn.args
        params = [*a.posonlyargs, *a.args, *a.kwonlyargs, *([a.vararg] if a.vararg else []),
                  *([a.kwarg] if a.kwarg else [])]
        bound: dict[str, int] = {p.arg: 0 for p in params}  # bound on entry
        read: dict[str, int] = {}
        declared: set[str] = set()
        for node in _own_nodes(fn):
            if isinstance(node, (ast.Global, ast.Nonlocal)):
                declared.update(node.names)
            elif isinstance(node, (ast.Import, ast.ImportFrom)):
                for alias in node.names:
                    name = alias.asname or alias.name.split(".")[0]
                    bound[name] = min(bound.get(name, node.lineno), node.lineno)
            elif isinstance(node, ast.Name):
                seen = bound if isinstance(node.ctx, (ast.Store, ast.Del)) else read
                seen[node.id] = min(seen.get(node.id, node.lineno), node.lineno)
        out |= {(fn.name, n) for n, line in read.items() if n in bound and line < bound[n] and n not in declared}
    return out


def _own_nodes(fn: ast.AST):
    """The nodes of a function's body, not those of functions, lambdas or classes nested in it."""
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def fix_source(
    source: str,
    path: str = "<string>",
    diagnostics: Sequence[Diagnostic] | None = None,
    options: FixOptions | None = None,
    diagnose: Diagnose | None = None,
) -> FileResult:
    """Repair one file's text. ``diagnostics`` are the sites to fix; with ``diagnose`` (a function
    returning the diagnostics of a source text) the engine re-checks after every round."""
    options = options or FixOptions()
    if diagnostics is None:
        if diagnose is None:
            raise ValueError("fix_source needs diagnostics or a diagnose function")
        diagnostics = diagnose(source)
    result = FileResult(path=path, original=source, fixed=source)
    current = source
    diags = [d for d in diagnostics if options.wants(d.code)]
    declines: list[Decline] = []
    postponed: list[Diagnostic] = []
    from mend.rewriter.fixes import fixer_for  # the fix modules import this one

    for _ in range(options.max_rounds):
        if not any(fixer_for(d.code) is not None for d in diags):
            declines = [Decline(d, no_fix_reason(d.code)) for d in diags]
            postponed = []
            break
        try:
            ctx = FileContext(current, path, options)
        except cst.ParserSyntaxError as exc:
            result.error = f"cannot parse: {exc.message} (line {exc.raw_line})"
            return result
        except (SyntaxError, ValueError) as exc:
            result.error = f"cannot parse: {exc}"
            return result
        plans, declines, postponed = plan_round(ctx, diags)
        if not plans:
            break
        new = apply_plans(ctx, plans)
        problem = _validate(new, path, current)
        if problem is not None:
            result.error = f"a repair produced code that does not parse or run ({problem}); file left unchanged"
            result.fixed = source
            result.applied = []
            return result
        for plan in plans:
            d = plan.diagnostic
            result.applied.append(AppliedFix(d.code, d.line, d.col, plan.message, plan.applicability))
        if new == current:
            break
        current = new
        if diagnose is None:
            break  # positions moved: postponed sites are reported, a second run repairs them
        diags = [d for d in diagnose(current) if options.wants(d.code)]
        declines, postponed = [], []
    result.fixed = current
    result.remaining = [Remaining(d.diagnostic, d.reason, d.unsafe_available) for d in declines]
    result.remaining += [Remaining(d, "overlaps another repair in this run; run mend fix again") for d in postponed]
    return result


__all__ = [
    "AppliedFix", "Decline", "FileContext", "FileResult", "FixOptions", "Plan", "Remaining",
    "apply_plans", "dotted", "fix_source", "plan_round", "walk",
]
