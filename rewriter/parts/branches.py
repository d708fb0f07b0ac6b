"""An ``if``/``elif``/``else`` chain on a tensor condition, read for the branch repairs (MND201).

:func:`read_chain` checks the structure every predicated form needs (simple statements in each branch,
plain-name assignments of values mend can prove side-effect free, returns in every branch or none) and
returns a :class:`Chain`, or raises :class:`~mend.rewriter.parts.lower.Declined` with the reason;
:func:`names_read_after` says which names the code after the chain may read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import libcst as cst

from mend.analyzers.static.torch_facts import MASK_UPDATE_HELPER
from mend.rewriter.analysis import (
    FunctionFacts,
    body_statements,
    code,
    in_place,
    is_container_or_none,
    names_in,
    strip_parens,
    walk,
)
from mend.rewriter.context import FileContext
from mend.rewriter.parts.lower import (
    Declined,
    Lower,
    and_of,
    drop_item,
    is_pass,
    no_tensor_part,
    split_static_prefix,
)
from mend.rewriter.parts.sites import branch_node
from mend.rewriter.plan import Decline


def branch_chain(node: cst.If) -> tuple[list[tuple[cst.BaseExpression, cst.BaseSuite]], cst.BaseSuite | None]:
    branches = []
    cur: cst.If | None = node
    orelse = None
    while cur is not None:
        branches.append((cur.test, cur.body))
        nxt = cur.orelse
        if isinstance(nxt, cst.If):
            cur = nxt
        else:
            orelse = nxt.body if isinstance(nxt, cst.Else) else None
            cur = None
    return branches, orelse


def top_if(ctx: FileContext, node: cst.If) -> cst.If:
    while True:
        parent = ctx.parent(node)
        if isinstance(parent, cst.If) and parent.orelse is node:
            node = parent
        else:
            return node


def defined_before(ctx: FileContext, facts: FunctionFacts, name: str, stmt: cst.CSTNode) -> bool:
    if name in facts.params:
        return True
    line = ctx.line_of(stmt)
    for store in facts.stores.get(name, []):
        if ctx.positions[store].start.line < line:
            return True
    return False


@dataclass
class Chain:
    """An ``if``/``elif``/``else`` chain that passed the structural checks of a branch repair."""

    node: cst.If  # the top ``if``
    tests: list[cst.BaseExpression]  # one per ``if``/``elif`` (without a static ``and`` prefix)
    bodies: list[list[cst.BaseSmallStatement]]  # one per test, then the ``else`` body when there is one
    has_else: bool
    static_prefix: list[cst.BaseExpression]
    follow_return: cst.Return | None  # the ``return`` after an else-less chain whose branches return
    needs_cond: bool  # a branch calls a submodule: only torch.cond can take it

    @property
    def returns(self) -> bool:
        return bool(self.bodies[0]) and isinstance(self.bodies[0][-1], cst.Return)

    def assignments(self, body: list) -> list[cst.Assign]:
        return [s for s in body if isinstance(s, cst.Assign)]

    def targeted_values(self) -> list[tuple[str | None, cst.BaseExpression]]:
        """``values()`` with the name each is assigned to (None for a returned value)."""
        assigned = {id(s.value): s.targets[0].target.value for b in self.bodies for s in self.assignments(b)}
        return [(assigned.get(id(v)), v) for v in self.values()]

    def values(self) -> list[cst.BaseExpression]:
        out = [s.value for b in self.bodies for s in self.assignments(b)]
        if self.returns:
            out += [b[-1].value for b in self.bodies]
            if self.follow_return is not None:
                out.append(self.follow_return.value)
        return out


def read_chain(ctx: FileContext, node: cst.If, facts: FunctionFacts) -> Chain:
    """The chain's parts, or ``Declined`` with the reason it cannot be repaired."""
    branches, orelse = branch_chain(node)
    tests = [t for t, _ in branches]
    static_prefix: list = []
    if len(branches) == 1 and orelse is None:
        static_prefix, rest = split_static_prefix(tests[0], facts)
        if static_prefix:
            if not rest:
                raise Declined(no_tensor_part(tests[0], facts))
            tests = [and_of(rest)]
    elif any(split_static_prefix(t, facts)[0] for t in tests):
        raise Declined("a static prefix of an `and` chain is kept in Python only for a single `if` "
                        "without `else`")
    bodies = [_simple_body(b, "a branch") for _, b in branches]
    if orelse is not None:
        bodies.append(_simple_body(orelse, "the else branch"))
    follow_return = _check_returns(ctx, node, bodies, orelse is not None)
    needs_cond = any([_check_statement(s, facts) for b in bodies for s in b])  # every statement is checked
    for test in tests:
        if not facts.is_pure(drop_item(test)):
            raise Declined("the condition has calls mend cannot prove side-effect free")
    if _declared_outside(ctx, node, bodies):
        raise Declined("a branch assigns a `global`/`nonlocal` name; its value is visible outside "
                        "the function")
    return Chain(node, tests, bodies, orelse is not None, static_prefix, follow_return, needs_cond)


def _simple_body(block: cst.BaseSuite, what: str) -> list[cst.BaseSmallStatement]:
    stmts = body_statements(block)
    if stmts is None:
        raise Declined(f"{what} holds a nested compound statement (if/for/with/try)")
    return stmts


def _check_returns(ctx: FileContext, node: cst.If, bodies: list, has_else: bool) -> cst.Return | None:
    """Every branch returns (then the chain is complete: an else, or a ``return`` right after) or none."""
    ends = [bool(b) and isinstance(b[-1], cst.Return) for b in bodies]
    if not any(ends):
        return None
    if not all(ends):
        raise Declined("only some branches return")
    if has_else:
        return None
    follow = _next_return(ctx, node)
    if follow is None:
        raise Declined("the branches return but the code after the `if` does not")
    return follow


def _check_statement(s: cst.BaseSmallStatement, facts: FunctionFacts) -> bool:
    """Decline a statement no repair takes; True when it needs torch.cond (a submodule call)."""
    if is_pass(s):
        return False
    if isinstance(s, cst.Return):
        if s.value is None or is_container_or_none(s.value):
            raise Declined("a branch returns a non-tensor value")
        value = s.value
    elif isinstance(s, cst.Assign):
        if len(s.targets) != 1 or not isinstance(s.targets[0].target, cst.Name):
            raise Declined("only assignments to plain names are predicated (a tuple or attribute "
                            "target is not)")
        if is_container_or_none(s.value):
            raise Declined(f"`{code(s.value)}` is not a tensor value" + (
                "; a branch that sets a name to None (no mask) selects what the code reading it does, which "
                "torch.where cannot hold" if code(s.value) == "None" else ""))
        value = s.value
    elif isinstance(s, cst.AugAssign):
        raise Declined("augmented assignment (`x += ...`) may update a tensor in place; rewrite it as "
                        "`x = x + ...` first")
    elif isinstance(s, cst.Raise):
        raise Declined("a branch raises (a validation guard is MND203)")
    else:
        raise Declined(f"a branch holds a {type(s).__name__} statement with possible side effects")
    if facts.is_pure(value):
        return False
    if cond_pure(facts, value) and isinstance(s, cst.Assign):
        return True
    hint = (" (a branch that returns is not moved into torch.cond; assign the value and return it after "
            "the `if`)") if cond_pure(facts, value) else ""
    raise Declined(f"`{code(value)}` has calls mend cannot prove side-effect free (only torch/F./tensor-"
                    f"method calls and submodule calls `self.m(...)` can move into torch.cond){hint}")


def _declared_outside(ctx: FileContext, node: cst.If, bodies: list) -> bool:
    func = ctx.enclosing_function(node)
    if func is None:
        return True
    declared = _global_names(func)
    return any(s.targets[0].target.value in declared for b in bodies for s in b if isinstance(s, cst.Assign))


def _global_names(func: cst.FunctionDef) -> set[str]:
    return {item.name.value for n in walk(func) if isinstance(n, (cst.Global, cst.Nonlocal)) for item in n.names}


def cond_pure(facts: FunctionFacts, expr: cst.BaseExpression) -> bool:
    """Pure as ``facts.is_pure`` allows, plus calls of submodules ``self.m(...)``."""
    for n in walk(expr):
        if isinstance(n, (cst.Yield, cst.Await, cst.NamedExpr, cst.Lambda)):
            return False
        if isinstance(n, cst.Call) and not facts.pure_call(n):
            f = n.func
            if not (isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == "self"
                    and f.attr.value in facts.module_attrs):
                return False
    return True


def assigns(body, name: str) -> bool:
    return any(isinstance(s, cst.Assign) and s.targets[0].target.value == name for s in body)


def names_read_after(ctx: FileContext, node: cst.If, facts: FunctionFacts) -> set[str]:
    """Names the code may read after ``node``: a load after it or at an unknown position, any name of
    a loop around it (read again on the next iteration) or of a nested function or lambda (which may
    run later)."""
    end = ctx.positions[node].end.line
    func = ctx.enclosing_function(node)
    if func is not None:
        ctx.prepare_parents(func)
    out = {name for name, uses in facts.loads.items()
           if any((u not in ctx.positions or ctx.positions[u].start.line > end) and not _store_dominates(ctx, u, end)
                  for u in uses)}
    for anc in ctx.ancestors(node):
        if isinstance(anc, (cst.For, cst.While)):
            out |= names_in(anc)
        if anc is func:
            break
    if func is not None:
        for n in walk(func.body):
            if isinstance(n, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
                out |= names_in(n)
    return out


def updated_in_place_after(ctx: FileContext, node: cst.CSTNode, names: set[str]) -> str | None:
    """A name that code after ``node`` (or in a loop around it) updates in place (``x.add_(1)``, ``x[m] = v``,
    ``x[m] += v``, ``x += v``, ``_mend_mask_update(x, ...)``) and that may share storage with one of ``names``
    (itself, or through a chain of views and plain copies of the name anywhere in the function: ``v = x[0]``,
    ``z = x``, ``x = t.view(-1)``); else None. A selection (``x = torch.where(c, new, x)``) makes ``x`` a new
    tensor even where the original kept it, so such an update no longer reaches, or no longer shows in, what
    ``x`` held before (an input, an attribute, another name for it; found by the property tests)."""
    func = ctx.enclosing_function(node)
    if func is None or not names:
        return None
    related = _storage_sharers(func, names)
    end = ctx.positions[node].end.line
    looped = {id(n) for loop in ctx.ancestors(node) if isinstance(loop, (cst.For, cst.While)) for n in walk(loop)}
    for n in walk(func.body):
        target = _updated_name(n)
        if target is None or target.value not in related or target not in ctx.positions:
            continue
        if id(n) in looped or (ctx.positions[target].start.line > end and not _fresh_before(ctx, target, end)):
            return target.value
    return None


_VIEWS = frozenset("view view_as reshape reshape_as transpose permute t unsqueeze squeeze expand expand_as narrow "
                   "select flatten unflatten contiguous detach as_strided diagonal movedim swapaxes swapdims "
                   "unbind split chunk unfold".split())
_VIEW_ATTRS = frozenset({"T", "mT", "H", "mH", "data", "real", "imag"})


def _shared(e: cst.BaseExpression) -> set[str]:
    """Names whose storage the value of ``e`` may share: a name, an index or slice of one, a view of one, a side
    of a conditional expression or of ``and``/``or``, an element of a tuple or list."""
    e = strip_parens(e)
    if isinstance(e, cst.Name):
        return {e.value}
    if isinstance(e, cst.Subscript) or (isinstance(e, cst.Attribute) and e.attr.value in _VIEW_ATTRS):
        return _shared(e.value)
    if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value in _VIEWS:
        return _shared(e.func.value)
    if isinstance(e, cst.IfExp):
        return _shared(e.body) | _shared(e.orelse)
    if isinstance(e, cst.BooleanOperation):
        return _shared(e.left) | _shared(e.right)
    if isinstance(e, (cst.Tuple, cst.List)):
        return {n for el in e.elements for n in _shared(el.value)}
    return set()


def _storage_sharers(func: cst.FunctionDef, names: set[str]) -> set[str]:
    """``names`` and every name linked to them by an assignment of a value that may share storage (either way)."""
    edges = []
    for n in walk(func.body):
        if isinstance(n, cst.Assign):
            targets = {t for a in n.targets for t in _shared(a.target) if isinstance(a.target, (cst.Name, cst.Tuple,
                                                                                              cst.List))}
            edges.append((targets, _shared(n.value)))
    related = set(names)
    grown = True
    while grown:
        grown = False
        for targets, sources in edges:
            if (targets | sources) & related and not (targets | sources) <= related:
                related |= targets | sources
                grown = True
    return related


def _updated_name(n: cst.CSTNode) -> cst.Name | None:
    """The name a node updates in place, if it is one of the forms :func:`updated_in_place_after` knows."""
    target = None
    if isinstance(n, cst.AugAssign):
        target = n.target
    elif isinstance(n, cst.AssignTarget) and isinstance(n.target, cst.Subscript):
        target = n.target
    elif isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and in_place(n.func.attr.value):
        target = n.func.value
    elif isinstance(n, cst.Call) and isinstance(n.func, cst.Name) and n.func.value == MASK_UPDATE_HELPER and n.args:
        target = n.args[0].value
    while isinstance(target, cst.Subscript):
        target = target.value
    return target if isinstance(target, cst.Name) else None


def _fresh_before(ctx: FileContext, use: cst.Name, after: int) -> bool:
    """A statement of the block holding ``use``, after line ``after`` and before ``use``, binds its name to a
    new tensor (a value sharing no name's storage: ``x = x + 1``), so ``use`` updates that one."""
    return _assigned_before(ctx, use, after, lambda value: not _shared(value))


def _store_dominates(ctx: FileContext, use: cst.Name, after: int) -> bool:
    """A statement of the block holding ``use``, after line ``after`` and before ``use``, assigns its
    name plainly, so ``use`` reads that value and never one stored at or before ``after``
    (``clamp_value = ...`` at the top of each of several ``if`` bodies: the first one's is dead)."""
    return _assigned_before(ctx, use, after, lambda value: True)


def _assigned_before(ctx: FileContext, use: cst.Name, after: int,
                     value_ok: Callable[[cst.BaseExpression], bool]) -> bool:
    """A plain ``name = value`` of ``use``'s name, with ``value_ok(value)``, in the block holding ``use``, after
    line ``after`` and before ``use`` (not looking past a function, class, lambda or comprehension)."""
    child: cst.CSTNode = use
    for anc in ctx.ancestors(use):
        if isinstance(anc, (cst.Lambda, cst.FunctionDef, cst.ClassDef, cst.CompFor)):
            return False
        if isinstance(anc, (cst.IndentedBlock, cst.Module)):
            before = []
            for stmt in anc.body:
                if stmt is child:
                    break
                before.append(stmt)
            else:
                return False
            return any(isinstance(s, cst.SimpleStatementLine) and s in ctx.positions
                       and ctx.positions[s].start.line > after and any(
                isinstance(x, cst.Assign) and len(x.targets) == 1 and isinstance(x.targets[0].target, cst.Name)
                and x.targets[0].target.value == use.value and value_ok(x.value) for x in s.body) for s in before)
        child = anc
    return False


def _next_return(ctx: FileContext, node: cst.If) -> cst.Return | None:
    parent = ctx.parent(node)
    body = getattr(parent, "body", None)
    if not isinstance(body, (list, tuple)):
        return None
    idx = next((i for i, s in enumerate(body) if s is node), None)
    if idx is None or idx + 1 >= len(body):
        return None
    nxt = body[idx + 1]
    if isinstance(nxt, cst.SimpleStatementLine) and len(nxt.body) == 1 and isinstance(nxt.body[0], cst.Return):
        return nxt.body[0]
    return None


@dataclass
class IfSite:
    """An MND201 site that is an ``if`` statement: its top ``if`` (of an ``elif`` chain), what the
    strategies ask of the function around it, and the lowering of its conditions."""

    node: cst.If
    facts: FunctionFacts
    torch: str
    imports: list
    lower: Lower


def if_site(ctx: FileContext, diag) -> IfSite | Decline | None:
    """The ``if`` an MND201 finding is on (a decline where no branch repair applies; None for a conditional
    expression)."""
    node = branch_node(ctx, diag)
    if not isinstance(node, cst.If):
        return node if isinstance(node, Decline) else None
    facts = ctx.facts(ctx.enclosing_function(node))
    torch, imports = ctx.torch_name()
    return IfSite(top_if(ctx, node), facts, torch, imports, Lower(facts, torch))


__all__ = [
    "Chain", "IfSite", "assigns", "branch_chain", "cond_pure", "defined_before", "names_read_after", "read_chain", "top_if", "if_site",
]
