"""The fix engine: diagnostics in, repaired source out (no torch import).

One round: parse the file once (a :class:`~mend.rewriter.context.FileContext`), run each diagnostic's
strategies in the order its rule lists them (the registry the engine is given,
:mod:`mend.rewriter.registry`; the first :class:`~mend.rewriter.plan.Plan` wins, the declines are collected
into one reason), apply every non-overlapping plan in one transformer pass, add imports with
``AddImportsVisitor``, and check that the result parses and compiles. Then re-diagnose the new source and
repeat until nothing more changes (at most ``max_rounds``). A round whose output would not parse is
discarded: the file keeps the last good text and the failure is reported.

The engine knows no strategy: it runs what the registry hands it.
"""

from __future__ import annotations

import ast
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

import libcst as cst
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import RemoveImportsVisitor

from mend import deadline
from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.context import FileContext
from mend.rewriter.helper_module import helper_import, public_name
from mend.rewriter.module_edits import ImportItem, add_imports, apply_edits
from mend.rewriter.options import FixOptions
from mend.rewriter.plan import Decline, Plan
from mend.rewriter.results import AppliedFix, FileResult, Remaining, line_map, original_line
from mend.rewriter.strategy import Registry, first_plan, no_fix_reason

Diagnose = Callable[[str], list[Diagnostic]]


def _overlaps(a: cst.CSTNode, b: cst.CSTNode, ctx: FileContext) -> bool:
    ra, rb = ctx.positions.get(a), ctx.positions.get(b)
    if ra is None or rb is None:
        return a is b
    a0, a1 = (ra.start.line, ra.start.column), (ra.end.line, ra.end.column)
    b0, b1 = (rb.start.line, rb.start.column), (rb.end.line, rb.end.column)
    return a0 < b1 and b0 < a1


def _same_nodes(a: list, b: list) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


class _Taken:
    """This round's plans and the nodes their edits replace, indexed: which plan already replaces the same nodes
    (by identity, in order) and which taken node a new edit's overlaps, without reading every plan for each
    (a file of thousands of findings). Positions do not change while a round plans (``prepare`` ran before)."""

    def __init__(self, ctx: FileContext) -> None:
        self.ctx = ctx
        self.plans: list[Plan] = []
        self._by_nodes: dict[tuple[int, ...], Plan] = {}  # the first plan replacing exactly these nodes
        self._unplaced: set[int] = set()  # taken nodes without a position: only the node itself overlaps them
        self._by_line: dict[int, list[cst.CSTNode]] = {}  # a line -> the positioned taken nodes over it
        self._nodes: list[cst.CSTNode] = []  # keeps the taken nodes (their ids are keys above) alive

    def overlaps(self, node: cst.CSTNode) -> bool:
        """:func:`_overlaps` of ``node`` and a node taken so far."""
        rng = self.ctx.positions.get(node)
        if rng is None:
            return id(node) in self._unplaced
        seen: set[int] = set()
        for line in range(rng.start.line, rng.end.line + 1):  # two nodes that overlap share a line
            for other in self._by_line.get(line, ()):
                if id(other) not in seen:
                    seen.add(id(other))
                    if _overlaps(node, other, self.ctx):
                        return True
        return False

    def take(self, nodes: list[cst.CSTNode]) -> None:
        for node in nodes:
            self._nodes.append(node)
            rng = self.ctx.positions.get(node)
            if rng is None:
                self._unplaced.add(id(node))
            else:
                for line in range(rng.start.line, rng.end.line + 1):
                    self._by_line.setdefault(line, []).append(node)

    def add(self, plan: Plan) -> None:
        self.plans.append(plan)
        key = tuple(id(n) for n, r in plan.edits if not callable(r))
        if key:
            self._by_nodes.setdefault(key, plan)

    def same(self, targets: list[cst.CSTNode]) -> Plan | None:
        return self._by_nodes.get(tuple(id(n) for n in targets)) if targets else None


def _take(result: Plan, taken: _Taken, postponed: list[Diagnostic]) -> None:
    """Add ``result`` to this round's plans unless its edits overlap one already taken (then its site
    waits for the next round, on the repaired text)."""
    targets = [node for node, repl in result.edits if not callable(repl)]
    same = taken.same(targets)
    if same is not None:  # the same repair already covers this site (e.g. a time call inside a guarded print)
        taken.add(Plan(result.diagnostic, same.message, same.applicability, [], strategy=same.strategy,
                       keeps_break=same.keeps_break))
        return
    if any(taken.overlaps(t) for t in targets):
        postponed.append(result.diagnostic)
        return
    taken.take(targets)
    taken.add(result)


def plan_round(ctx: FileContext, diagnostics: Sequence[Diagnostic]) -> tuple[list[Plan], list[Decline], list[Diagnostic]]:
    """Plans for every diagnostic whose fix is proven, declines with reasons, and postponed sites."""
    declines: list[Decline] = []
    postponed: list[Diagnostic] = []
    taken = _Taken(ctx)
    ctx.prepare(d.line for d in diagnostics if d.code in ctx.strategies)
    fallbacks: list[Plan] = []
    for diag in sorted(diagnostics, key=lambda d: (d.line, d.col, d.code)):
        deadline.check()  # the file's time limit (mend.deadline); raised past the `except Exception` below
        strategies = ctx.strategies.get(diag.code)
        if not strategies:
            declines.append(Decline(diag, no_fix_reason(diag.code)))
            continue
        try:
            result = first_plan(ctx, diag, strategies, no_fix_reason(diag.code))
        except Exception as exc:  # a strategy's bug must not lose the file: decline and say so
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
            _take(result, taken, postponed)
    for result in fallbacks:
        _take(result, taken, postponed)
    return taken.plans, declines, postponed


def apply_plans(ctx: FileContext, plans: Sequence[Plan]) -> tuple[str, list[str]]:
    """The file with ``plans`` applied, and the helpers (``_mend_*``) it now imports."""
    imports: list[ImportItem] = []
    helpers: list[str] = []
    for plan in plans:
        imports.extend((mod, obj, asname, 0) for mod, obj, asname in plan.imports)
        helpers.extend(plan.helpers)
    module = apply_edits(ctx.module, [edit for plan in plans for edit in plan.edits], ctx.parent)
    # a file repaired when helpers were pasted into it defines them itself: it keeps those
    defined = {s.name.value for s in ctx.module.body if isinstance(s, (cst.FunctionDef, cst.ClassDef))}
    helpers = [h for h in dict.fromkeys(helpers) if h not in defined]
    if helpers:
        source = helper_import(ctx.path, ctx.options.helpers, ctx.options.helpers_within)
        imports.extend((source.module, public_name(h), h, source.level) for h in helpers)
    if imports:
        module = add_imports(module, imports)
    drops = [m for plan in plans for m in plan.drop_imports]
    if drops:
        context = CodemodContext()
        for mod in dict.fromkeys(drops):
            RemoveImportsVisitor.remove_unused_import(context, mod)
        module = RemoveImportsVisitor(context).transform_module(module)
    return module.code, helpers


def _validate(text: str, path: str, original: str) -> str | None:
    try:
        compile(text, path, "exec", dont_inherit=True)
    except (cst.ParserSyntaxError, SyntaxError, ValueError) as exc:
        return f"{type(exc).__name__}: {exc}"
    early = _reads_before_binding(text)
    early = early - _reads_before_binding(original) if early else early
    if early:
        func, name = sorted(early)[0]
        return f"`{name}` would be read in {func}() before the function binds it itself (UnboundLocalError)"
    return None


@lru_cache(maxsize=8)  # a round's new text is the next round's original
def _reads_before_binding(text: str) -> frozenset[tuple[str, str]]:
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
    return frozenset(out)


def _own_nodes(fn: ast.AST):
    """The nodes of a function's body, not those of functions, lambdas or classes nested in it."""
    stack = list(ast.iter_child_nodes(fn))
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
            stack.extend(ast.iter_child_nodes(node))


def _site_key(text: str, d: Diagnostic) -> tuple[str, str]:
    """A finding by its code and its line's text: the same site in the next round's text, where lines moved."""
    lines = _lines(text)
    return d.code, (lines[d.line - 1].strip() if 0 < d.line <= len(lines) else str(d.line))


@lru_cache(maxsize=2)  # a round asks for the lines of each finding of its text
def _lines(text: str) -> list[str]:
    return text.splitlines()


def _leave_their_finding(plans: Sequence[Plan], before: Sequence[Diagnostic], after: Sequence[Diagnostic],
                         old: str, new: str) -> list[Plan]:
    """The plans whose sites the repaired text still has: as many findings of the plan's code at its line
    (mapped back through :func:`line_map`) as before. Such a repair moved nothing out of the graph's way."""
    lines = line_map(old, new)
    count_before = Counter((d.code, d.line) for d in before)
    count_after = Counter((d.code, original_line(lines, d.line)) for d in after)
    return [p for p in plans if count_after[(p.diagnostic.code, p.diagnostic.line)]
            >= count_before[(p.diagnostic.code, p.diagnostic.line)] > 0]


@dataclass
class _Invalid:
    problem: str


def _keep_what_removes(ctx: FileContext, plans: list[Plan], diags: Sequence[Diagnostic], declines: list[Decline],
                       kept: dict[tuple[str, str], str], diagnose: Diagnose | None):
    """Apply ``plans`` and re-check; a plan whose finding the new text still has is taken back (removed from
    ``plans``, declined with the reason, its site remembered in ``kept`` for the next rounds) and the rest
    applied again. Returns the new text (or :class:`_Invalid`), its helpers and its findings (None when not
    re-checked)."""
    current = ctx.source
    while plans:
        new, helpers = apply_plans(ctx, plans)
        problem = _validate(new, ctx.path, current)
        if problem is not None:
            return _Invalid(problem), [], None
        if new == current or diagnose is None:
            return new, helpers, None
        found = diagnose(new)
        failed = _leave_their_finding(plans, diags, found, current, new)
        if not failed:
            return new, helpers, found
        for plan in failed:
            reason = f"the repair leaves the finding in place ({plan.message.split(':')[0]})"
            kept[_site_key(current, plan.diagnostic)] = reason
            declines.append(Decline(plan.diagnostic, reason))
        plans[:] = [p for p in plans if p not in failed]
    return current, [], None


def fix_source(
    source: str,
    path: str,
    diagnostics: Sequence[Diagnostic] | None,
    options: FixOptions | None,
    diagnose: Diagnose | None,
    strategies: Registry,
) -> FileResult:
    """Repair one file's text with ``strategies`` (rule code -> its strategies in order). ``diagnostics`` are
    the sites to fix; with ``diagnose`` (a function returning the diagnostics of a source text) the engine
    re-checks after every round."""
    options = options or FixOptions()
    if diagnostics is None:
        if diagnose is None:
            raise ValueError("fix_source needs diagnostics or a diagnose function")
        diagnostics = diagnose(source)
    result = FileResult(path=path, original=source, fixed=source)
    current = source
    diags = [d for d in diagnostics if options.wants(d.code)]
    found = list(diagnostics)  # the findings of ``current``, every rule's
    declines: list[Decline] = []
    postponed: list[Diagnostic] = []
    kept: dict[tuple[str, str], str] = {}  # (code, line text) -> why a repair there was taken back
    for _ in range(options.max_rounds):
        deadline.check()
        if not any(d.code in strategies for d in diags):
            declines = [Decline(d, no_fix_reason(d.code)) for d in diags]
            postponed = []
            result.settled = found
            break
        try:
            ctx = FileContext(current, path, options, strategies)
        except cst.ParserSyntaxError as exc:
            result.error = f"cannot parse: {exc.message} (line {exc.raw_line})"
            return result
        except (SyntaxError, ValueError) as exc:
            result.error = f"cannot parse: {exc}"
            return result
        taken_back = [Decline(d, kept[_site_key(current, d)]) for d in diags if _site_key(current, d) in kept]
        plans, declines, postponed = plan_round(ctx, [d for d in diags if _site_key(current, d) not in kept])
        declines += taken_back
        new, helpers, found_new = _keep_what_removes(ctx, plans, diags, declines, kept, diagnose)
        if isinstance(new, _Invalid):
            result.error = f"a repair produced code that does not parse or run ({new.problem}); file left unchanged"
            result.fixed = source
            result.applied, result.helpers = [], []
            return result
        if not plans and postponed:
            continue  # what overlapped a repair taken back is planned again on the same text
        if not plans:
            result.settled = found
            break
        result.helpers += [h for h in helpers if h not in result.helpers]
        back = line_map(source, current) if current != source else None  # a later round's lines, in the user's
        for plan in plans:
            d = plan.diagnostic
            line = original_line(back, d.line) if back else d.line
            end = max(line, original_line(back, d.end_line)) if back and d.end_line else d.end_line
            result.applied.append(AppliedFix(d.code, line, d.col, plan.message, plan.applicability, plan.strategy,
                                             end, plan.keeps_break))
        if new == current:
            break
        current = new
        if diagnose is None:
            break  # positions moved: postponed sites are reported, a second run repairs them
        found = found_new if found_new is not None else diagnose(current)
        diags = [d for d in found if options.wants(d.code)]
        declines, postponed = [], []
    result.fixed = current
    result.remaining = [Remaining(d.diagnostic, d.reason, d.unsafe_available) for d in declines]
    result.remaining += [Remaining(d, "overlaps another repair in this run; run mend fix again") for d in postponed]
    return result


__all__ = ["Diagnose", "apply_plans", "fix_source", "plan_round"]
