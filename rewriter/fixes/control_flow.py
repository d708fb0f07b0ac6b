"""Families 2 and 3: data-dependent branches -> ``torch.where``; validation guards -> in-graph checks.

Branches (MND201). Eager always keeps the original chain: the repair is
``if not torch.compiler.is_compiling(): <the original if> else: <the predicated form>``. Accepted
shapes, over a whole ``if``/``elif``/``else`` chain:

* every branch body is simple statements: assignments of side-effect-free expressions to plain
  names, ``pass``, or (in every branch) a final ``return <expr>``;
* the conditions lower to bool tensors: ``and``/``or``/``not`` become ``torch.logical_*``,
  ``.item()``/``float()`` become ``.double()`` (compares like the Python number), ``bool(t)`` is
  ``t``; a leading *static* prefix of an ``and`` chain (``h.dtype == torch.float16 and ...``) stays a
  Python test around the predicated form;
* no side can change shape (``torch.cat``, reshapes, indexing): torch.where cannot select between
  sides of different shapes; except a broadcast update ``h = h * mask[:, None]`` (only the other
  operand reshaped), which has ``h``'s shape or makes ``_mend_where`` fall back (unsafe);
* a name a branch assigns is defined before the chain, or assigned in every branch of a complete
  chain, or a temporary of its branch (neither defined before nor read after).

Under compile, conditions are computed first, then each assignment becomes
``x = _mend_where(cond_k, new, x)`` in order, exact for mutually exclusive one-element conditions.
``_mend_where`` (a helper added to the file) is ``torch.where`` when the sides agree in shape, dtype and
device, decided while tracing, and the original selection otherwise. A name whose values are dtype or
device reads (``dtype = h.dtype``) becomes ``_mend_same(cond, new, old)``: ``old`` when ``new`` is the
same object, else the original selection. The side not taken is computed
too: the fix is *safe* when every such expression cannot raise (``FunctionFacts.is_total``), else
*unsafe*. When a value's gradient could be infinite on the unselected side, the original branch also
runs when grad is enabled (GraphMend's gate).

Branches whose assignments call submodules (``self.m(...)``; otherwise only what ``is_pure``
allows) cannot be predicated, since both sides would run. A plain ``if``/``else`` (or else-less
``if``) of assignments becomes, under compile only::

    if not torch.compiler.is_compiling():
        <the original if>                    # eager: unchanged
    else:
        def _mend_trueN():  ...; return (a, b)   # assigned names renamed, outputs = names read after
        def _mend_falseN(): ...; return (a.clone(), b)
        a, b = torch.cond(cond, _mend_trueN, _mend_falseN, ())

The branch functions close over their inputs (no operands, so no tensor proof is needed for them);
an output computed by no call in a branch is cloned, since torch.cond rejects outputs aliasing its
inputs. Always unsafe: dtypes of the two sides must agree, views of inputs fail to trace, and
parameters of the branch not taken receive zero gradients rather than None (measured, torch 2.13).

Validation (MND203): ``if <tensor cond>: raise E("literal")`` with a builtin exception becomes::

    if not torch.compiler.is_compiling():
        <the original if/raise>            # eager: unchanged
    else:
        torch._assert_async(torch.logical_not(cond), "[mend:E] literal")

and every ``torch.compile`` boundary in the same file is wrapped with ``_mend_restore_exceptions``,
which re-raises ``E("literal")``. Unsafe: under compile the check runs inside the graph (on CUDA it
is asynchronous) and, where no boundary is wrapped, surfaces as ``RuntimeError("[mend:E] literal")``.
"""

from __future__ import annotations

import ast
import builtins
from dataclasses import dataclass

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import BOOL_OPS, FLOAT_DTYPES, TOTAL_ELEMENTWISE, is_compiling_call
from mend.rewriter.analysis import (
    FunctionFacts,
    body_statements,
    code,
    dotted,
    eager_else,
    is_container_or_none,
    is_literal,
    names_in,
    parse_expr,
    parse_stmt,
    strip_parens,
    walk,
)
from mend.rewriter.engine import Decline, FileContext, Plan
from mend.rewriter.fixes import buffer_select, fallback_select, mask_drop, store_select
from mend.rewriter.fixes.base import fixer
from mend.rewriter.fixes.kept_values import kept_values_plan


class _Declined(Exception):
    pass


def _chain(node: cst.If) -> tuple[list[tuple[cst.BaseExpression, cst.BaseSuite]], cst.BaseSuite | None]:
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


def _top_if(ctx: FileContext, node: cst.If) -> cst.If:
    while True:
        parent = ctx.parent(node)
        if isinstance(parent, cst.If) and parent.orelse is node:
            node = parent
        else:
            return node


class _Lower:
    """Lower a Python condition over tensors to a bool-tensor expression (text)."""

    def __init__(self, facts: FunctionFacts, torch: str) -> None:
        self.facts = facts
        self.torch = torch
        self.helpers: list[str] = []  # helpers the lowered text calls

    def __call__(self, expr: cst.BaseExpression) -> str:
        expr = strip_parens(expr)
        t = self.torch
        if isinstance(expr, cst.BooleanOperation):
            fn = "logical_and" if isinstance(expr.operator, cst.And) else "logical_or"
            return f"{t}.{fn}({self(expr.left)}, {self(expr.right)})"
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            return f"{t}.logical_not({self(expr.expression)})"
        if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value == "bool" \
                and len(expr.args) == 1 and not expr.args[0].keyword and "bool" not in self.facts.stores:
            return self(expr.args[0].value)
        if _builtin_reduction(self.facts, expr):  # ``any(t)``: ``torch.any(t)`` for a 1-D tensor
            self.helpers.append("_mend_any")
            every = ", every=True" if expr.func.value == "all" else ""
            return f"_mend_any({code(expr.args[0].value)}{every})"
        if not self.facts.reads_data(_drop_item(expr)):
            raise _Declined(f"`{code(expr)}` is not a tensor condition; only a leading static part "
                            "of an `and` chain can stay in Python")
        if isinstance(expr, cst.Call):
            qual = self.facts.imports.qualify(expr.func) or ""
            if qual in {"torch.equal", "torch.allclose"} or (
                isinstance(expr.func, cst.Attribute) and expr.func.attr.value in {"equal", "allclose", "tolist"}
            ):
                raise _Declined("`torch.equal`/`allclose` return Python bools; no tensor form here")
        expr = _item_to_double(expr, self.facts)
        if isinstance(expr, cst.Comparison):
            if len(expr.comparisons) != 1:
                raise _Declined("chained comparisons are not lowered")
            op = expr.comparisons[0].operator
            if isinstance(op, (cst.Is, cst.IsNot, cst.In, cst.NotIn)):
                raise _Declined("`is`/`in` tests are not tensor conditions")
            return code(expr)
        if isinstance(expr, cst.Call):
            name = (expr.func.attr.value if isinstance(expr.func, cst.Attribute)
                    else (self.facts.imports.qualify(expr.func) or "").rsplit(".", 1)[-1])
            if name in BOOL_OPS:
                return code(expr)
        return f"({code(expr)}).bool()" if not isinstance(expr, (cst.Name, cst.Call, cst.Attribute)) \
            else f"{code(expr)}.bool()"


def _builtin_reduction(facts: FunctionFacts, expr: cst.BaseExpression) -> bool:
    """``any(t)`` / ``all(t)`` of a tensor (the builtins, not shadowed)."""
    return isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in ("any", "all") \
        and expr.func.value not in facts.stores and len(expr.args) == 1 and not expr.args[0].keyword \
        and not expr.args[0].star and facts.reads_data(expr.args[0].value)


class _DropItem(cst.CSTTransformer):
    """``t.item()``, ``bool(t)``, ``float(t)`` -> ``t``: what a condition reads, for the purity and
    tensor-ness questions (the lowering itself keeps their meaning: :func:`_item_to_double`)."""

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        func = updated_node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "item" and not updated_node.args:
            return func.value
        if isinstance(func, cst.Name) and func.value in {"bool", "float"} and len(updated_node.args) == 1 \
                and not updated_node.args[0].keyword:
            return updated_node.args[0].value
        return updated_node


class _ItemToDouble(cst.CSTTransformer):
    def __init__(self, facts: FunctionFacts) -> None:
        self.facts = facts

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        func = updated_node.func
        if isinstance(func, cst.Attribute) and func.attr.value == "item" and not updated_node.args:
            return updated_node.with_changes(func=func.with_changes(attr=cst.Name("double")))
        if isinstance(func, cst.Name) and func.value == "float" and len(updated_node.args) == 1 \
                and not updated_node.args[0].keyword and self.facts.reads_data(updated_node.args[0].value):
            return parse_expr(f"({code(updated_node.args[0].value)}).double()")
        return updated_node


def _item_to_double(expr: cst.BaseExpression, facts: FunctionFacts) -> cst.BaseExpression:
    """``t.item()`` / ``float(t)`` -> ``t.double()`` in a lowered condition: a 0-d float64 tensor computes and compares
    like the Python number (``t.item() >= 0.1`` on a float16 ``t`` would otherwise compare against
    0.1 rounded to float16; ``t.item() * 2`` would overflow in float16). Exact for integers below 2**53."""
    out = expr.visit(_ItemToDouble(facts))
    assert isinstance(out, cst.BaseExpression)
    return out


def _drop_item(expr: cst.BaseExpression) -> cst.BaseExpression:
    out = expr.visit(_DropItem())
    assert isinstance(out, cst.BaseExpression)
    return out


def _split_static_prefix(test: cst.BaseExpression, facts: FunctionFacts) -> tuple[list, list]:
    """Operands of a top-level ``and`` chain: (static prefix, rest)."""
    ops: list[cst.BaseExpression] = []

    def flat(e: cst.BaseExpression) -> None:
        e2 = strip_parens(e) if not getattr(e, "lpar", None) else e
        if isinstance(e2, cst.BooleanOperation) and isinstance(e2.operator, cst.And) and not e2.lpar:
            flat(e2.left)
            flat(e2.right)
        else:
            ops.append(e)

    flat(strip_parens(test))  # the parentheses around a whole test spread over lines are not a group
    i = 0
    while i < len(ops) and not facts.reads_data(_drop_item(strip_parens(ops[i]))):
        i += 1
    return ops[:i], ops[i:]


def _and_text(ops: list[cst.BaseExpression]) -> str:
    return " and ".join(code(o) for o in ops)


def _is_pass(s: cst.BaseSmallStatement) -> bool:
    return isinstance(s, cst.Pass)


def _defined_before(ctx: FileContext, facts: FunctionFacts, name: str, stmt: cst.CSTNode) -> bool:
    if name in facts.params:
        return True
    line = ctx.line_of(stmt)
    for store in facts.stores.get(name, []):
        if ctx.positions[store].start.line < line:
            return True
    return False


@fixer("MND201")
def fix_branch(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    node = ctx.find((cst.If, cst.IfExp, cst.While), diag)
    if node is None:
        return Decline(diag, "could not find the branch at this position")
    if isinstance(node, cst.While):
        return Decline(diag, "data-dependent `while` loops need torch._higher_order_ops.while_loop; "
                             "not rewritten automatically")
    if ctx.in_compile_guard(node):
        return Decline(diag, "already split by torch.compiler.is_compiling() (the original branch is kept "
                             "where autograd or eager needs it)")
    kept = kept_values_plan(ctx, diag, node.test)  # ``if positions[0] > 0:`` on a tensor of Python numbers
    if isinstance(kept, Plan) and ctx.options.unsafe:  # (unsafe: a safe repair below goes first without it)
        return kept
    func = ctx.enclosing_function(node)
    facts = ctx.facts(func)
    torch, imports = ctx.torch_name()
    lower = _Lower(facts, torch)
    try:
        if isinstance(node, cst.IfExp):
            plan = _fix_ifexp(ctx, diag, node, facts, lower, imports)
        else:
            plan = _fix_if(ctx, diag, _top_if(ctx, node), facts, lower, torch, imports)
    except _Declined as exc:
        return Decline(diag, str(exc))
    if isinstance(plan, Plan):
        plan.helpers.extend(h for h in lower.helpers if h not in plan.helpers)
    return plan


def _fix_ifexp(ctx, diag, node: cst.IfExp, facts, lower, imports) -> Plan | Decline:
    """``a if c else b`` -> ``(a if c else b) if not is_compiling() else _mend_where(c, a, b)``."""
    if not (facts.is_pure(node.body) and facts.is_pure(node.orelse)):
        raise _Declined("a side of the conditional expression has calls mend cannot prove pure")
    for side in (node.body, node.orelse):
        if is_container_or_none(side):
            raise _Declined("a side of the conditional expression is not a tensor value")
    if not (facts.is_tensor(node.body) or facts.is_tensor(node.orelse)):
        raise _Declined("cannot prove either side of the conditional expression is a tensor")
    cond = lower(node.test)
    t = lower.torch
    original = node.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    new = parse_expr(f"{code(original)} if not {t}.compiler.is_compiling() else _mend_where({cond}, "
                     f"{code(strip_parens(node.body))}, {code(strip_parens(node.orelse))})")
    new = new.with_changes(lpar=node.lpar or [cst.LeftParen()], rpar=node.rpar or [cst.RightParen()])
    speculated = [node.body, node.orelse, *_speculated_tests(node.test)]
    safe = all(facts.is_total(e) for e in speculated)
    grad_safe = facts.is_grad_safe(node.body) and facts.is_grad_safe(node.orelse)
    if not grad_safe:
        raise _Declined("a side's gradient can be infinite where it is not selected (NaN gradients "
                        "under torch.where); a conditional expression has no place to keep the original "
                        "for autograd")
    return Plan(diag, "conditional expression -> torch.where under compile (eager keeps it)",
                "safe" if safe else "unsafe", [(node, new)], imports=imports, helpers=["_mend_where"])


@dataclass
class _Chain:
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


def _fix_if(ctx: FileContext, diag: Diagnostic, node: cst.If, facts: FunctionFacts, lower: _Lower,
            torch: str, imports: list) -> Plan | Decline:
    branches, orelse = _chain(node)
    if len(branches) == 1 and orelse is None and ctx.options.side_effects in {"guard", "keep"}:
        guarded = _fix_reporting_if(ctx, diag, node, facts, imports)
        if guarded is not None:
            return guarded
    selection = buffer_select.match(node)
    if selection is not None:
        return _fix_buffer_selection(ctx, diag, node, selection, facts, lower, torch, imports)
    dropped = _fix_mask_drop(ctx, diag, node, torch, imports)
    if dropped is not None:
        return dropped
    stored = _fix_store(ctx, diag, node, facts, lower, torch, imports)
    if stored is not None:
        return stored
    try:
        chain = _read_chain(ctx, node, facts)
    except _Declined:  # no repair of the chain itself: an early return of another implementation's result?
        fallback = _fix_fallback(ctx, diag, node, facts, lower, torch, imports)
        if fallback is not None:
            return fallback
        raise
    if chain.needs_cond:
        if chain.returns:
            raise _Declined("a branch with submodule calls returns; torch.cond is applied only to "
                            "branches that assign names")
        if len(chain.tests) != 1 or chain.static_prefix:
            raise _Declined("branches with submodule calls are moved into torch.cond only for a "
                            "plain `if`/`else` (no elif, no static `and` prefix)")
        else_stmts = chain.bodies[1] if chain.has_else else None
        return _fix_cond(ctx, diag, node, facts, lower(chain.tests[0]), chain.bodies[0], else_stmts, torch,
                         imports)
    return _where_plan(ctx, diag, chain, facts, lower, torch, imports)


def _fix_buffer_selection(ctx: FileContext, diag: Diagnostic, node: cst.If,
                          selection: buffer_select.BufferSelection, facts: FunctionFacts, lower: _Lower,
                          torch: str, imports: list) -> Plan:
    """Both sides register one buffer: under compile it is registered once, holding the selected value
    (LongRoPE's ``inv_freq``); eager keeps the branch. See :mod:`mend.rewriter.fixes.buffer_select`."""
    if not facts.is_pure(_drop_item(node.test)):
        raise _Declined("the condition has calls mend cannot prove side-effect free")
    read_later = buffer_select.local_names(selection) & _names_read_after(ctx, node, facts)
    if read_later:
        raise _Declined(f"`{sorted(read_later)[0]}`, assigned by one side, is read after the `if`")
    try:
        compiled = buffer_select.compiled_statements(selection, facts, lower(node.test))
    except ValueError as exc:
        raise _Declined(str(exc)) from None
    split = eager_else(torch, [node], compiled)
    return Plan(diag, "data-dependent branch (buffer) -> one register_buffer of the torch.where-selected value "
                      "under compile (eager keeps the branch)", "unsafe", [(node, split)], imports=imports,
                helpers=["_mend_where"])


def _fix_mask_drop(ctx: FileContext, diag: Diagnostic, node: cst.If, torch: str, imports: list) -> Plan | None:
    """A branch of the chain sets a mask of all ones to None: under compile its test is false and the
    mask is kept (eager keeps the test). See :mod:`mend.rewriter.fixes.mask_drop`."""
    parent = ctx.parent(node)
    block = list(getattr(parent, "body", ()))
    branch: cst.If | None = node
    while isinstance(branch, cst.If):
        drop = mask_drop.match(branch, block, node, torch)
        if isinstance(drop, str):
            raise _Declined(drop)
        if drop is not None:
            new = mask_drop.guarded(drop, torch, whole=drop.test is branch.test)
            return Plan(diag, f"a mask of all ones set to None: under compile `{drop.target}` keeps the mask "
                              "(its all-ones test is false there; eager keeps the test)", "unsafe",
                        [(drop.test, new)], imports=imports)
        branch = branch.orelse if isinstance(branch.orelse, cst.If) else None
    return None


def _lowered_tail(node: cst.If, facts: FunctionFacts, lower: _Lower,
                  what: str = "the condition") -> tuple[list, str] | None:
    """The test's static prefix (a Python test) and the rest lowered to a bool tensor, or None where the
    test has no tensor part; declined where the rest has calls mend cannot prove side-effect free."""
    static_prefix, tail = _split_static_prefix(node.test, facts)
    if not tail:
        return None
    if not all(facts.is_pure(_drop_item(t)) for t in tail):
        raise _Declined(f"{what} has calls mend cannot prove side-effect free")
    return static_prefix, lower(_and_of(tail))


def _fix_store(ctx: FileContext, diag: Diagnostic, node: cst.If, facts: FunctionFacts, lower: _Lower,
               torch: str, imports: list) -> Plan | None:
    """One store into a tensor under the test: under compile, with gradients off, the element is stored
    on every path, the torch.where-selected value (eager keeps the branch). See
    :mod:`mend.rewriter.fixes.store_select`."""
    found = store_select.match(node, facts, _static_index)
    if found is None:
        return None
    if isinstance(found, str):
        raise _Declined(found)
    lowered = _lowered_tail(node, facts, lower)
    if lowered is None:
        raise _Declined("the condition has no tensor part mend can see")
    static_prefix, cond = lowered
    store = parse_stmt(store_select.compiled(found, cond, torch))
    split = eager_else(torch, [node], [store], grad_gate=True, prefix=_and_text(static_prefix))
    return Plan(diag, "a data-dependent store into a tensor: under compile (gradients off) the element is stored "
                      "on every path, the torch.where-selected value (eager keeps the branch)", "unsafe",
                [(node, split)], imports=imports, helpers=["_mend_mask_if" if found.mask is not None else "_mend_where"])


def _fix_fallback(ctx: FileContext, diag: Diagnostic, node: cst.If, facts: FunctionFacts, lower: _Lower,
                  torch: str, imports: list) -> Plan | None:
    """An early ``return`` of another implementation's result: under compile, with gradients off, both are
    computed and the final ``return`` selects (eager keeps the branch). See
    :mod:`mend.rewriter.fixes.fallback_select`."""
    from mend.rewriter.fixes.side_effects import _is_reporting_call

    def is_report(call: cst.Call) -> bool:
        qual = ctx.imports.qualify(call.func) or ""
        return _is_reporting_call(ctx, call) or code(call.func) == "_mend_emit" or is_compiling_call(qual)

    found = fallback_select.match(ctx, node, is_report)
    if found is None:
        return None
    if isinstance(found, str):
        raise _Declined(found)
    lowered = _lowered_tail(node, facts, lower, "the fallback's test")
    if lowered is None:
        return None
    static_prefix, cond = lowered
    return Plan(diag, "a data-dependent fallback that returns early: under compile (gradients off) both "
                      "results are computed and the final `return` selects with torch.where (eager keeps the "
                      "branch)", "unsafe", fallback_select.rewrite(ctx, found, _and_text(static_prefix), cond, torch),
                imports=imports, helpers=["_mend_where"])


# --- may this chain be rewritten? ---------------------------------------------------------------

def _read_chain(ctx: FileContext, node: cst.If, facts: FunctionFacts) -> _Chain:
    """The chain's parts, or ``_Declined`` with the reason it cannot be repaired."""
    branches, orelse = _chain(node)
    tests = [t for t, _ in branches]
    static_prefix: list = []
    if len(branches) == 1 and orelse is None:
        static_prefix, rest = _split_static_prefix(tests[0], facts)
        if static_prefix:
            if not rest:
                raise _Declined("the condition has no tensor part mend can see")
            tests = [_and_of(rest)]
    elif any(_split_static_prefix(t, facts)[0] for t in tests):
        raise _Declined("a static prefix of an `and` chain is kept in Python only for a single `if` "
                        "without `else`")
    bodies = [_simple_body(b, "a branch") for _, b in branches]
    if orelse is not None:
        bodies.append(_simple_body(orelse, "the else branch"))
    follow_return = _check_returns(ctx, node, bodies, orelse is not None)
    needs_cond = any([_check_statement(s, facts) for b in bodies for s in b])  # every statement is checked
    for test in tests:
        if not facts.is_pure(_drop_item(test)):
            raise _Declined("the condition has calls mend cannot prove side-effect free")
    if _declared_outside(ctx, node, bodies):
        raise _Declined("a branch assigns a `global`/`nonlocal` name; its value is visible outside "
                        "the function")
    return _Chain(node, tests, bodies, orelse is not None, static_prefix, follow_return, needs_cond)


def _and_of(ops: list[cst.BaseExpression]) -> cst.BaseExpression:
    expr = ops[0]
    for r in ops[1:]:
        expr = cst.BooleanOperation(left=expr, operator=cst.And(), right=r)
    return expr


def _simple_body(block: cst.BaseSuite, what: str) -> list[cst.BaseSmallStatement]:
    stmts = body_statements(block)
    if stmts is None:
        raise _Declined(f"{what} holds a nested compound statement (if/for/with/try)")
    return stmts


def _check_returns(ctx: FileContext, node: cst.If, bodies: list, has_else: bool) -> cst.Return | None:
    """Every branch returns (then the chain is complete: an else, or a ``return`` right after) or none."""
    ends = [bool(b) and isinstance(b[-1], cst.Return) for b in bodies]
    if not any(ends):
        return None
    if not all(ends):
        raise _Declined("only some branches return")
    if has_else:
        return None
    follow = _next_return(ctx, node)
    if follow is None:
        raise _Declined("the branches return but the code after the `if` does not")
    return follow


def _check_statement(s: cst.BaseSmallStatement, facts: FunctionFacts) -> bool:
    """Decline a statement no repair takes; True when it needs torch.cond (a submodule call)."""
    if _is_pass(s):
        return False
    if isinstance(s, cst.Return):
        if s.value is None or is_container_or_none(s.value):
            raise _Declined("a branch returns a non-tensor value")
        value = s.value
    elif isinstance(s, cst.Assign):
        if len(s.targets) != 1 or not isinstance(s.targets[0].target, cst.Name):
            raise _Declined("only assignments to plain names are predicated (a tuple or attribute "
                            "target is not)")
        if is_container_or_none(s.value):
            raise _Declined(f"`{code(s.value)}` is not a tensor value" + (
                "; a branch that sets a name to None (no mask) selects what the code reading it does, which "
                "torch.where cannot hold" if code(s.value) == "None" else ""))
        value = s.value
    elif isinstance(s, cst.AugAssign):
        raise _Declined("augmented assignment (`x += ...`) may update a tensor in place; rewrite it as "
                        "`x = x + ...` first")
    elif isinstance(s, cst.Raise):
        raise _Declined("a branch raises (a validation guard is MND203)")
    else:
        raise _Declined(f"a branch holds a {type(s).__name__} statement with possible side effects")
    if facts.is_pure(value):
        return False
    if _cond_pure(facts, value) and isinstance(s, cst.Assign):
        return True
    hint = (" (a branch that returns is not moved into torch.cond; assign the value and return it after "
            "the `if`)") if _cond_pure(facts, value) else ""
    raise _Declined(f"`{code(value)}` has calls mend cannot prove side-effect free (only torch/F./tensor-"
                    f"method calls and submodule calls `self.m(...)` can move into torch.cond){hint}")


def _declared_outside(ctx: FileContext, node: cst.If, bodies: list) -> bool:
    func = ctx.enclosing_function(node)
    if func is None:
        return True
    declared = _global_names(func)
    return any(s.targets[0].target.value in declared for b in bodies for s in b if isinstance(s, cst.Assign))


def _global_names(func: cst.FunctionDef) -> set[str]:
    return {item.name.value for n in walk(func) if isinstance(n, (cst.Global, cst.Nonlocal)) for item in n.names}


# --- write it -------------------------------------------------------------------------------------

def _where_plan(ctx: FileContext, diag: Diagnostic, chain: _Chain, facts: FunctionFacts, lower: _Lower,
                torch: str, imports: list) -> Plan:
    """Eager keeps the chain; under compile each value is selected with ``_mend_where``.

    ``_mend_where`` (a helper added to the file) is ``torch.where`` when the two sides agree in shape,
    dtype and device and the condition is one element, decided while tracing; otherwise it selects
    exactly as the original did (``new if cond else old``), so a wrong guess costs a graph break, never
    a different value. What can differ under compile is only that the side not taken is computed too:
    the fix is safe when every such expression cannot raise (``FunctionFacts.is_total``).
    """
    broadcast = False
    for target, value in chain.targeted_values():
        op = facts.shape_changing(value)
        if op is None:
            continue
        if target is not None and _broadcast_update(value, target):
            broadcast = True  # `h = h * mask[:, None]`: only the other operand is reshaped
            continue
        raise _Declined(f"the sides can differ in shape (`{op}` in `{code(value)}`): torch.where cannot "
                        "select between them, and computing the side not taken can fail")
    conds = [lower(t) for t in chain.tests]
    if chain.returns:
        compiled = _where_returns(chain, facts, conds, torch)
    else:
        compiled = _where_assignments(ctx, chain, facts, conds, torch)
    floating = _floating_names(chain.static_prefix)
    speculated = chain.values() + [t for test in chain.tests for t in _speculated_tests(test)][1:]
    safe = not broadcast and all(facts.is_total(e, floating) for e in speculated)
    grad_gate = not all(facts.is_grad_safe(v) for v in chain.values())
    split = eager_else(torch, [chain.node], [parse_stmt(t + "\n") for t in compiled], grad_gate=grad_gate,
                       prefix=_and_text(chain.static_prefix))
    what = "returns" if chain.returns else "assignments"
    msg = f"data-dependent branch ({what}) -> torch.where under compile (eager keeps the branch"
    msg += "; also when grad is enabled)" if grad_gate else ")"
    helpers = [h for h in ("_mend_where", "_mend_elif", "_mend_same") if any(f"{h}(" in t for t in compiled)]
    return Plan(diag, msg, "safe" if safe else "unsafe", [(chain.node, split)], imports=imports, helpers=helpers)


_BROADCAST_OPS = (cst.Multiply, cst.Add, cst.Subtract, cst.Divide)


def _broadcast_update(value: cst.BaseExpression, name: str) -> bool:
    """``value`` is ``name <op> other`` (``*``, ``+``, ``-``, ``/``), maybe cast with ``.to(...)``:
    the result has ``name``'s shape broadcast with ``other``'s, whatever ``other`` reshapes or indexes
    (``h * mask[:, None]``, ``(h * mask.unsqueeze(1)).to(dtype)``). Where the broadcast shape or the
    dtype differs from the old value's, ``_mend_where`` selects as the original did (a graph break,
    never another value). Computing the side not taken can still fail on shapes the original branch
    never met (``other`` not broadcasting), so the repair is unsafe."""
    v = strip_parens(value)
    while isinstance(v, cst.Call) and isinstance(v.func, cst.Attribute) and v.func.attr.value == "to":
        v = strip_parens(v.func.value)
    if not (isinstance(v, cst.BinaryOperation) and isinstance(v.operator, _BROADCAST_OPS)):
        return False
    sides = [strip_parens(v.left), strip_parens(v.right)]
    return any(isinstance(x, cst.Name) and x.value == name for x in sides)


def _where_returns(chain: _Chain, facts: FunctionFacts, conds: list[str], torch: str) -> list[str]:
    """``return _mend_where(c1, r1, _mend_where(c2, r2, r3))``, after each branch's temporaries."""
    values = [b[-1].value for b in chain.bodies]
    if chain.follow_return is not None:
        values.append(chain.follow_return.value)
    if not any(facts.is_tensor(v) for v in values):
        raise _Declined("cannot prove any returned value is a tensor")
    out: list[str] = []
    seen: set[str] = set()
    for k, body in enumerate(chain.bodies):
        others = set().union(*(names_in(s) for j, b in enumerate(chain.bodies) if j != k for s in b))
        for s in chain.assignments(body):
            name = s.targets[0].target.value
            if name in seen or name in others or name in facts.params or _stored_elsewhere(facts, name, chain):
                raise _Declined(f"`{name}` is assigned before a return and read or assigned elsewhere; "
                                "only fresh temporaries of one branch can be computed on every path")
            seen.add(name)
            out.append(code(s).strip())
    exclusive, taken = conds[:1], conds[0]
    for c in conds[1:]:  # an `elif` asks for its condition only where no earlier branch was taken
        exclusive.append(f"_mend_elif({taken}, {c})")
        taken = f"{torch}.logical_or({taken}, {c})"
    expr = code(strip_parens(values[-1]))
    for cond, v in reversed(list(zip(exclusive, values[:-1]))):
        expr = f"_mend_where({cond}, {code(strip_parens(v))}, {expr})"
    return out + [f"return {expr}"]


def _stored_elsewhere(facts: FunctionFacts, name: str, chain: _Chain) -> bool:
    """``name`` is stored outside the chain (so it is not a temporary of one branch)."""
    inside = {id(n) for n in walk(chain.node)}
    return any(id(s) not in inside for s in facts.stores.get(name, []))


def _where_assignments(ctx: FileContext, chain: _Chain, facts: FunctionFacts, conds: list[str],
                       torch: str) -> list[str]:
    """Each assignment becomes ``x = _mend_where(cond_k, value, x)``, conditions computed first.

    A name defined before the chain keeps its old value on the other side. A name first defined in
    the chain and read after it must be assigned in every branch of a complete chain; its first
    assignment is plain (some branch always overwrites what it does not select). A name neither
    defined before nor read after is a temporary of its branch: assigned plainly where it was.
    """
    live = _names_read_after(ctx, chain.node, facts)
    temporaries = _branch_temporaries(chain, live)
    out: list[str] = []
    cond_vars = _exclusive_conditions(ctx, chain, conds, torch, out)
    started: set[str] = set()
    for k, body in zip(cond_vars, chain.bodies):
        assigned_here: set[str] = set()
        for s in chain.assignments(body):
            name = s.targets[0].target.value
            _check_reads(ctx, chain, facts, s.value, assigned_here)
            value = code(strip_parens(s.value))
            if name in temporaries:
                out.append(f"{name} = {value}")
            elif _defined_before(ctx, facts, name, chain.node):
                if _static_assigned(chain, name):
                    out.append(f"{name} = _mend_same({k}, {value}, {name})")
                elif not _tensor_assigned(chain, facts, name):
                    raise _Declined(f"cannot prove `{name}` holds a tensor (a dtype or device read, "
                                    "`x.dtype`, is the only other value selected)")
                else:
                    out.append(f"{name} = _mend_where({k}, {value}, {name})")
            elif name in live:
                if not (chain.has_else and all(_assigns(b, name) for b in chain.bodies)):
                    raise _Declined(f"`{name}` is not defined before the `if` and not assigned in every "
                                    "branch, so it has no value on the other side of torch.where")
                if not _tensor_assigned(chain, facts, name):
                    raise _Declined(f"cannot prove `{name}` holds a tensor")
                out.append(f"{name} = {value}" if name not in started else f"{name} = _mend_where({k}, {value}, {name})")
                started.add(name)
            else:
                out.append(f"{name} = {value}")
            assigned_here.add(name)
    if not any("_mend_where(" in t for t in out):
        raise _Declined("the branches assign nothing that is read after the `if`")
    return out


def _branch_temporaries(chain: _Chain, live: set[str]) -> set[str]:
    """Names no code after the chain reads and that each branch mentioning them assigns before reading
    them: each branch computes its own value, so assigning them plainly on every path changes nothing
    the original computes (even when the name held a value before the chain)."""
    out = set()
    for name in {s.targets[0].target.value for b in chain.bodies for s in chain.assignments(b)} - live:
        ok = True
        for body in chain.bodies:
            for s in body:
                reads = names_in(s.value) if isinstance(s, (cst.Assign, cst.Return)) and s.value else set()
                if name in reads:
                    ok = False  # read before this branch assigns it
                if isinstance(s, cst.Assign) and s.targets[0].target.value == name:
                    break
            if not ok:
                break
        if ok:
            out.add(name)
    return out


def _exclusive_conditions(ctx: FileContext, chain: _Chain, conds: list[str], torch: str,
                          out: list[str]) -> list[str]:
    """One condition per body, true for exactly the body the original runs (hoisted when needed)."""
    statements = sum(1 for b in chain.bodies for s in b if not _is_pass(s))
    if len(conds) == 1 and not chain.has_else and statements == 1:
        return conds
    names: list[str] = []
    taken = None
    for c in conds:
        var = ctx.fresh("cond")
        out.append(f"{var} = {c}" if taken is None else f"{var} = _mend_elif({taken}, {c})")
        taken = var if taken is None else f"{torch}.logical_or({taken}, {var})"
        names.append(var)
    if chain.has_else:
        var = ctx.fresh("cond")
        out.append(f"{var} = {torch}.logical_not({taken})")
        names.append(var)
    return names


_STATIC_ATTRS = frozenset({"dtype", "device"})


def _static_assigned(chain: _Chain, name: str) -> bool:
    """Every value the chain assigns to ``name`` reads a tensor's ``.dtype`` or ``.device``: a Python
    constant while Dynamo traces. ``_mend_same`` keeps the old value when the new one is the same
    object (no selection is needed: Zamba's ``dtype = hidden_states.dtype`` beside a masked update),
    and otherwise selects as the original did (a graph break, never another value)."""
    values = [s.value for b in chain.bodies for s in chain.assignments(b) if s.targets[0].target.value == name]
    return bool(values) and all(isinstance(v, cst.Attribute) and v.attr.value in _STATIC_ATTRS for v in
                                map(strip_parens, values))


def _tensor_assigned(chain: _Chain, facts: FunctionFacts, name: str) -> bool:
    """Some branch assigns ``name`` a provable tensor, or it holds one everywhere (``_mend_where`` checks
    the rest while tracing; this only keeps mend from rewriting selections between Python values). A
    broadcast update ``name * mask[:, None]`` counts: its other operand is reshaped or indexed by a
    tensor operation, which Python numbers and lists do not have."""
    return name in facts.tensor_names or any(
        facts.is_tensor(s.value) or (_broadcast_update(s.value, name) and facts.shape_changing(s.value))
        for b in chain.bodies for s in chain.assignments(b) if s.targets[0].target.value == name)


def _check_reads(ctx: FileContext, chain: _Chain, facts: FunctionFacts, value: cst.BaseExpression,
                 assigned_here: set[str]) -> None:
    """A value may not read a name that only the chain defines before its own branch assigns it
    (the original would raise NameError there; the rewrite would read another branch's value)."""
    in_chain = {s.targets[0].target.value for b in chain.bodies for s in chain.assignments(b)}
    for name in names_in(value) & in_chain - assigned_here:
        if not _defined_before(ctx, facts, name, chain.node):
            raise _Declined(f"`{name}` is read in a branch before that branch assigns it")


def _speculated_tests(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of a condition, in order: all but the first may run only in the rewrite
    (``and``/``or`` short-circuit in Python; ``torch.logical_and``/``logical_or`` compute both)."""
    test = strip_parens(test)
    if isinstance(test, cst.BooleanOperation):
        return _speculated_tests(test.left) + _speculated_tests(test.right)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _speculated_tests(test.expression)
    return [_drop_item(test)]


def _floating_names(prefix: list[cst.BaseExpression]) -> frozenset[str]:
    """Tensors whose dtype a static ``and`` prefix tests to be floating (``x.dtype == torch.float16``)."""
    out = set()
    for op in prefix:
        op = strip_parens(op)
        if isinstance(op, cst.Comparison) and len(op.comparisons) == 1 and \
                isinstance(op.comparisons[0].operator, cst.Equal):
            left, right = op.left, op.comparisons[0].comparator
            for a, b in ((left, right), (right, left)):
                if isinstance(a, cst.Attribute) and a.attr.value == "dtype" and \
                        isinstance(b, cst.Attribute) and b.attr.value in FLOAT_DTYPES:
                    out.add(code(a.value))
    return frozenset(out)


def reporting_if_for(ctx: FileContext, diag: Diagnostic, stmt: cst.CSTNode) -> Plan | None:
    """The plan of :func:`_fix_reporting_if` when ``stmt`` (a print/log/warn) is the body of such an ``if``.

    Lets the MND101-103 finding inside the ``if`` share the repair of the MND201/301 finding at its test
    (one edit of the whole ``if``, recognised by the engine as the same repair).
    """
    block = ctx.parent(stmt)
    node = ctx.parent(block) if isinstance(block, cst.IndentedBlock) else None
    if not isinstance(node, cst.If) or node.body is not block or node.orelse is not None:
        return None
    parent = ctx.parent(node)
    if isinstance(parent, cst.If) and parent.orelse is node:  # an `elif`
        return None
    facts = ctx.facts(ctx.enclosing_function(node))
    if not _data_dependent(facts, node.test):
        return None
    _, imports = ctx.torch_name()
    try:
        return _fix_reporting_if(ctx, diag, node, facts, imports)
    except _Declined:
        return None


def _data_dependent(facts: FunctionFacts, test: cst.BaseExpression) -> bool:
    """The test reads tensor values: a ``.item()``, or a tensor used as a truth value or compared."""
    if isinstance(test, cst.UnaryOperation):
        return _data_dependent(facts, test.expression)
    if isinstance(test, cst.BooleanOperation):
        return _data_dependent(facts, test.left) or _data_dependent(facts, test.right)
    if isinstance(test, cst.Comparison):
        return facts.is_tensor(test.left) or any(facts.is_tensor(c.comparator) for c in test.comparisons) \
            or _data_dependent(facts, test.left)
    if isinstance(test, cst.Call) and isinstance(test.func, cst.Attribute) and test.func.attr.value == "item":
        return True
    return facts.is_tensor(test)


def _fix_reporting_if(ctx: FileContext, diag: Diagnostic, node: cst.If, facts: FunctionFacts,
                      imports: list) -> Plan | None:
    """``if <tensor cond>: print/log/warn(...)``: the check only decides whether to report.

    Eager evaluates the condition and reports exactly as before. Under compile, with the ``keep``
    side-effect policy, each report becomes ``_mend_emit(__name__, "... 0.when", <condition as a bool
    tensor>, ...)``: the graph makes the call where it stood, when the condition holds at run time;
    with ``guard``, nothing is reported under compile. Either way the condition is also checked where
    it would raise in eager (``_mend_truth``). **Safe** when the condition has no side effects. None
    when the body is not only reporting calls.
    """
    from mend.rewriter.fixes.side_effects import _emit_call, _guard_test, _is_reporting_call

    stmts = body_statements(node.body)
    if not stmts:
        return None
    reports = [s for s in stmts if isinstance(s, cst.Expr) and isinstance(s.value, cst.Call)
               and _is_reporting_call(ctx, s.value)]
    if not reports or any(not _is_pass(s) and s not in reports for s in stmts):
        return None
    if not facts.is_pure(_drop_item(node.test)):
        raise _Declined("the condition of the reporting `if` has calls mend cannot prove side-effect free")
    test, more = _guard_test(ctx)
    torch, _ = ctx.torch_name()
    lower = _Lower(facts, torch)
    compiled = [parse_stmt(_truth_check(facts, node.test, lower))]
    helpers = ["_mend_truth"]
    what = "under compile nothing is reported"
    if ctx.options.side_effects == "keep":
        prefix, rest = _split_static_prefix(node.test, facts)
        cond = lower(rest[0]) if len(rest) == 1 else lower(parse_expr(_and_text(rest)))
        for report in reports:
            emit = _emit_call(ctx, node, report.value, when=cond)
            if isinstance(emit, str):
                raise _Declined(f"the message cannot be kept under compile: {emit}")
            line = f"_mend_emit({', '.join(emit)})"
            compiled.append(parse_stmt(f"if {_and_text(prefix)}: {line}\n" if prefix else line + "\n"))
        helpers.append("_mend_emit")
        what = "under compile the graph reports where the condition holds (`_mend_emit`)"
    guarded = cst.If(test=parse_expr(test), body=cst.IndentedBlock(body=[node.with_changes(leading_lines=[])]),
                     orelse=cst.Else(body=cst.IndentedBlock(body=compiled)),
                     leading_lines=node.leading_lines)
    return Plan(diag, f"the check only decides whether to report: guard the whole `if` with `if {test}:` "
                      f"(eager unchanged; {what}, and the condition is checked to raise where it raises "
                      "in eager)", "safe", [(node, guarded)],
                imports=imports + more, helpers=[*helpers, *lower.helpers])


# Reductions over every element (no arguments): their result has one element.
_REDUCE_ALL = frozenset({"any", "all", "sum", "mean", "prod", "count_nonzero", "nansum", "max", "min", "amax",
                         "amin", "norm", "std", "var", "median", "nanmean"})
_TO_NUMBER = frozenset({"item", "float", "int"})  # conversions that fail on a tensor of many elements


def _truth_check(facts: FunctionFacts, test: cst.BaseExpression, lower: _Lower) -> str:
    """The statement the compiled side of a reporting ``if`` runs so that it raises where the original
    does: ``_mend_truth(<first tensor operand>)`` (errors computing it, and the truth of a tensor of many
    elements), behind the static prefix of an ``and`` chain. Python computes later ``and``/``or``
    operands only for some values, so they must be unable to fail (one element, total, no ``mean()``,
    which rejects integers); ``.item()``/``float()`` must read one element (their own error is not the
    lowered form's)."""
    prefix, rest = _split_static_prefix(test, facts)
    ops: list[cst.BaseExpression] = []

    def flat(e: cst.BaseExpression) -> None:
        e = strip_parens(e)
        if isinstance(e, cst.BooleanOperation):
            flat(e.left)
            flat(e.right)
        elif isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Not):
            flat(e.expression)
        elif isinstance(e, cst.Call) and isinstance(e.func, cst.Name) and e.func.value == "bool" \
                and len(e.args) == 1 and not e.args[0].keyword and "bool" not in facts.stores:
            flat(e.args[0].value)  # `bool(a and b)` computes `b` only for some values of `a`, too
        else:
            ops.append(e)

    for op in rest:
        flat(op)
    if not ops:
        raise _Declined("the condition has no tensor part mend can see")
    for op in ops[1:]:
        if not (facts.is_total(_drop_item(op)) and _one_element(facts, op)
                and not any(isinstance(n, cst.Name) and n.value in {"mean", "nanmean"} for n in walk(op))):
            raise _Declined(f"`{code(op)}` can raise, and Python computes it only for some values of the "
                            "operands before it: only the original `if` asks for it exactly there")
    for n in walk(ops[0]):
        receiver = _number_receiver(n)
        if receiver is not None and not _one_element(facts, receiver):
            raise _Declined(f"`{code(n)}` fails on a tensor of many elements with its own error")
        if isinstance(n, cst.Subscript) and not _static_index(facts, n):
            raise _Declined("the condition indexes by tensor values, whose errors an unused result "
                            "may not raise under compile")
    check = f"_mend_truth({lower(ops[0])})"
    return f"if {_and_text(prefix)}: {check}\n" if prefix else check + "\n"


def _number_receiver(n: cst.CSTNode) -> cst.BaseExpression | None:
    """The tensor a ``t.item()`` / ``float(t)`` / ``int(t)`` converts, or None."""
    if not isinstance(n, cst.Call):
        return None
    if isinstance(n.func, cst.Attribute) and n.func.attr.value == "item" and not n.args:
        return n.func.value
    if isinstance(n.func, cst.Name) and n.func.value in _TO_NUMBER and len(n.args) == 1:
        return n.args[0].value
    return None


def _one_element(facts: FunctionFacts, expr: cst.BaseExpression) -> bool:
    """``expr`` provably has one element (a full reduction, what is computed from one with numbers)."""
    expr = strip_parens(expr)
    if facts.is_python_number(expr) or is_literal(expr):
        return True
    if isinstance(expr, cst.UnaryOperation):
        return _one_element(facts, expr.expression)
    if isinstance(expr, cst.BinaryOperation):
        return _one_element(facts, expr.left) and _one_element(facts, expr.right)
    if isinstance(expr, cst.Comparison):
        return _one_element(facts, expr.left) and all(_one_element(facts, c.comparator) for c in expr.comparisons)
    receiver = _number_receiver(expr)
    if receiver is not None:
        return _one_element(facts, receiver)
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute):
        name = expr.func.attr.value
        if name in _REDUCE_ALL and not expr.args:
            return True
        if name in TOTAL_ELEMENTWISE:
            return _one_element(facts, expr.func.value)
    return False


def _static_index(facts: FunctionFacts, sub: cst.Subscript) -> bool:
    """Every index is a number, a slice of numbers, ``None`` or ``...``."""
    def static(e: cst.BaseExpression | None) -> bool:
        return e is None or facts.is_python_number(e) or (isinstance(e, cst.Name) and e.value == "None") \
            or isinstance(e, cst.Ellipsis)

    for el in sub.slice:
        s = el.slice
        if isinstance(s, cst.Slice):
            if not (static(s.lower) and static(s.upper) and static(s.step)):
                return False
        elif not static(s.value):
            return False
    return True


def _cond_pure(facts: FunctionFacts, expr: cst.BaseExpression) -> bool:
    """Pure as ``facts.is_pure`` allows, plus calls of submodules ``self.m(...)``."""
    for n in walk(expr):
        if isinstance(n, (cst.Yield, cst.Await, cst.NamedExpr, cst.Lambda)):
            return False
        if isinstance(n, cst.Call) and not facts._pure_call(n):
            f = n.func
            if not (isinstance(f, cst.Attribute) and isinstance(f.value, cst.Name) and f.value.value == "self"
                    and f.attr.value in facts.module_attrs):
                return False
    return True


class _Rename(cst.CSTTransformer):
    def __init__(self, names: dict[str, str]) -> None:
        self.names = names

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.Name:
        return updated_node.with_changes(value=self.names.get(updated_node.value, updated_node.value))

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.Attribute:
        return updated_node.with_changes(attr=original_node.attr)

    def leave_Arg(self, original_node: cst.Arg, updated_node: cst.Arg) -> cst.Arg:
        return updated_node.with_changes(keyword=original_node.keyword)


def _branch_function(name: str, stmts: list, outputs: list[str]) -> str:
    """A zero-argument function running ``stmts`` and returning ``outputs``.

    Names assigned in the branch are renamed (``_mend_x``) from their first assignment on, so the
    nested function reads the enclosing value before it (no UnboundLocalError) and never rebinds
    it. An output the branch does not compute from a call is cloned: torch.cond rejects a branch
    output that aliases an input or a closed-over tensor.
    """
    renamed: dict[str, str] = {}
    lines = []
    last_value: dict[str, cst.BaseExpression] = {}
    for s in stmts:
        if _is_pass(s):
            continue
        value = s.value.visit(_Rename(dict(renamed)))
        target = s.targets[0].target.value
        renamed[target] = f"_mend_{target}"
        last_value[target] = strip_parens(s.value)
        lines.append(f"    {renamed[target]} = {code(value)}")
    rets = []
    for o in outputs:
        v = last_value.get(o)
        ref = renamed.get(o, o)
        rets.append(ref if isinstance(v, (cst.Call, cst.BinaryOperation, cst.UnaryOperation)) else f"{ref}.clone()")
    lines.append(f"    return ({', '.join(rets)}{',' if len(rets) == 1 else ''})")
    return f"def {name}():\n" + "\n".join(lines) + "\n"


def _fix_cond(ctx: FileContext, diag: Diagnostic, node: cst.If, facts: FunctionFacts, cond: str,
              body: list, else_stmts: list | None, torch: str, imports: list) -> Plan:
    """``if c: A else: B`` with submodule calls -> ``torch.cond`` under compile; eager keeps the if."""
    live_after = _names_read_after(ctx, node, facts)
    outputs: list[str] = []
    for b in [body] + ([else_stmts] if else_stmts is not None else []):
        for s in b:
            if isinstance(s, cst.Assign):
                n = s.targets[0].target.value
                if n in live_after and n not in outputs:
                    outputs.append(n)
    if not outputs:
        raise _Declined("the branches assign nothing that is read after the `if`")
    branches = [body] + ([else_stmts] if else_stmts is not None else [[]])
    for n in outputs:
        if not _defined_before(ctx, facts, n, node) and not all(_assigns(b, n) for b in branches):
            raise _Declined(f"`{n}` is not defined before the `if` and not assigned in every branch, "
                            "so torch.cond has no value for it on one side")
        values = [s.value for b in branches for s in b if isinstance(s, cst.Assign)
                  and s.targets[0].target.value == n]
        if not (n in facts.tensor_names or any(facts.is_tensor(v) for v in values)):
            raise _Declined(f"cannot prove `{n}` holds a tensor (torch.cond outputs must be tensors)")
    true_fn, false_fn = ctx.fresh("true"), ctx.fresh("false")
    targets = ", ".join(outputs) + ("," if len(outputs) == 1 else "")
    texts = [
        _branch_function(true_fn, body, outputs),
        _branch_function(false_fn, else_stmts or [], outputs),
        f"{targets} = {torch}.cond({cond}, {true_fn}, {false_fn}, ())\n",
    ]
    compiled = [parse_stmt(t) for t in texts]
    split = eager_else(torch, [node], compiled)
    return Plan(diag, "data-dependent branch with submodule calls -> torch.cond under compile "
                      "(eager keeps the if)", "unsafe", [(node, split)], imports=imports)


def _assigns(body, name: str) -> bool:
    return any(isinstance(s, cst.Assign) and s.targets[0].target.value == name for s in body)


def _names_read_after(ctx: FileContext, node: cst.If, facts: FunctionFacts) -> set[str]:
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


def _store_dominates(ctx: FileContext, use: cst.Name, after: int) -> bool:
    """A statement of the block holding ``use``, after line ``after`` and before ``use``, assigns its
    name plainly, so ``use`` reads that value and never one stored at or before ``after``
    (``clamp_value = ...`` at the top of each of several ``if`` bodies: the first one's is dead)."""
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
                and x.targets[0].target.value == use.value for x in s.body) for s in before)
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


@fixer("MND203")
def fix_validation(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    node = ctx.find(cst.If, diag)
    if node is None:
        if ctx.find(cst.Assert, diag) is not None:
            return Decline(diag, "an assert on a tensor is traced without a break; nothing to repair")
        return Decline(diag, "could not find the `if ...: raise` at this position")
    return validation_plan(ctx, diag, node)


def validation_plan(ctx: FileContext, diag: Diagnostic, node: cst.If,
                    compiled_test: cst.BaseExpression | None = None) -> Plan | Decline:
    """The MND203 repair of ``node`` (``if <cond>: raise E(msg)``); ``compiled_test``: the condition as
    compiled code computes it, when it differs from the written one (a count read as a tensor)."""
    if node.orelse is not None or (isinstance(ctx.parent(node), cst.If) and ctx.parent(node).orelse is node):
        return Decline(diag, "the guard has elif/else branches")
    if ctx.in_compile_guard(node):
        return Decline(diag, "already split by torch.compiler.is_compiling()")
    stmts = body_statements(node.body)
    if not stmts or len(stmts) != 1 or not isinstance(stmts[0], cst.Raise):
        return Decline(diag, "the guard body is not exactly one `raise`")
    raise_stmt = stmts[0]
    if raise_stmt.cause is not None:
        return Decline(diag, "`raise ... from ...` is not rewritten")
    exc = raise_stmt.exc
    if not (isinstance(exc, cst.Call) and isinstance(exc.func, cst.Name) and len(exc.args) == 1
            and exc.args[0].keyword is None and not exc.args[0].star):
        return Decline(diag, "the raise is not `E(\"message\")` with one positional argument")
    exc_name = exc.func.value
    builtin_exc = getattr(builtins, exc_name, None)
    func = ctx.enclosing_function(node)
    facts = ctx.facts(func)
    if not (isinstance(builtin_exc, type) and issubclass(builtin_exc, Exception)) or exc_name in facts.stores \
            or exc_name in ctx.imports.names:
        return Decline(diag, f"`{exc_name}` is not a builtin exception, so it cannot be re-raised by name")
    message = _message_template(exc.args[0].value)
    if message is None:
        return Decline(diag, "the message is not a string literal or an f-string (formatting with `%` or "
                             "`.format()` is not rewritten)")
    if ctx.in_try(node):
        return Decline(diag, "the guard is inside a `try` in the same function; the moved check could "
                             "not be caught there")
    test = strip_parens(compiled_test if compiled_test is not None else node.test)
    if not facts.is_pure(_drop_item(test)):
        return Decline(diag, "the condition has calls mend cannot prove side-effect free")
    skipped = next((op for op in _skipped_when_quiet(test) if not facts.is_total(_drop_item(op))), None)
    if skipped is not None:
        return Decline(diag, f"`{code(skipped)}`: an `and`/`or` operand Python skips when the check passes, "
                             "which the check in the graph computes always, can raise")
    torch, imports = ctx.torch_name()
    helpers = []
    try:
        cond = _validation_cond(test, facts, torch, helpers)
    except _Declined as exc_:
        return Decline(diag, str(exc_))
    marker = f"[mend:{exc_name}] {message}"
    assert_text = f"{torch}._assert_async({torch}.logical_not({cond}), {marker!r})"
    split = eager_else(torch, [node], [parse_stmt(assert_text + "\n")])
    edits: list = [(node, split)]
    boundaries = _compile_boundaries(ctx)
    for target, repl in boundaries:
        edits.append((target, repl))
    if boundaries:
        helpers.append("_mend_restore_exceptions")
    where = "restored at this file's compile boundary" if boundaries else (
        "raised as RuntimeError('[mend:...]') unless the caller wraps its compiled object with "
        "mend.rewriter.runtime.restore_exceptions")
    if any(isinstance(n, cst.FormattedString) for n in walk(exc.args[0].value)):
        where += "; the f-string's values are written as their source, `{name}`"
    return Plan(diag, f"validation guard -> {torch}._assert_async under compile ({exc_name} {where})",
                "unsafe", edits, imports=imports, helpers=helpers)


def _skipped_when_quiet(test: cst.BaseExpression, quiet: bool = False) -> list[cst.BaseExpression]:
    """The ``and``/``or`` operands of ``test`` that Python skips on a run where ``test`` is ``quiet`` (the
    check passes): ``b`` of ``a and b`` when ``a`` is false, of ``a or b`` under ``not`` when ``a`` is true.
    Where the check fires anyway (``b`` of ``a or b``), an error computing ``b`` only replaces its error."""
    test = strip_parens(test)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _skipped_when_quiet(test.expression, not quiet)
    if not isinstance(test, cst.BooleanOperation):
        return []
    inner = [*_skipped_when_quiet(test.left, quiet), *_skipped_when_quiet(test.right, quiet)]
    skips_quietly = isinstance(test.operator, cst.And) != quiet  # `and` skips on false, `or` on true
    return [test.right, *inner] if skips_quietly else inner


def _message_template(node: cst.BaseExpression) -> str | None:
    """The text of a literal message; for an f-string, its literal parts with each replacement field
    written as its source (``f"tokens: {n}"`` -> ``"tokens: {n}"``): the values are not known inside
    the graph. None for anything else."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(node, cst.ConcatenatedString):
        left, right = _message_template(node.left), _message_template(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, cst.FormattedString):
        prefix = node.prefix.lower().replace("f", "")
        if "b" in prefix:
            return None
        parts = []
        for part in node.parts:
            if isinstance(part, cst.FormattedStringText):
                text = part.value.replace("{{", "{").replace("}}", "}")
                parts.append(ast.literal_eval(f"{prefix}{node.start[len(node.prefix):]}{text}{node.end}"))
            else:
                parts.append("{" + code(part.expression) + "}")
        return "".join(parts)
    return None


def _validation_cond(test: cst.BaseExpression, facts: FunctionFacts, torch: str, helpers: list) -> str:
    """Bool tensor that is True when the guard fires."""
    neg = False
    inner = test
    if isinstance(inner, cst.UnaryOperation) and isinstance(inner.operator, cst.Not):
        neg, inner = True, strip_parens(inner.expression)
    if isinstance(inner, cst.Call):
        qual = facts.imports.qualify(inner.func) or ""
        if qual == "torch.equal" and len(inner.args) == 2:
            helpers.append("_mend_tensor_equal")
            body = f"_mend_tensor_equal({code(inner.args[0].value)}, {code(inner.args[1].value)})"
            return f"{torch}.logical_not({body})" if neg else body
    try:
        lower = _Lower(facts, torch)
        cond = lower(test)
        helpers.extend(lower.helpers)
        return cond
    except _Declined:
        if not _plain_comparison(test):
            raise
    # The analyzer found a tensor here that this function's facts cannot show (a count from an
    # unannotated argument, `(input_ids == k).sum()`): ``torch.as_tensor`` returns a tensor as it is and
    # makes a Python bool a 0-d tensor, so the check holds exactly when the original condition does.
    return f"{torch}.as_tensor({code(test)})"


def _plain_comparison(test: cst.BaseExpression) -> bool:
    """``a <op> b`` with one order or equality operator (not ``is``/``in``)."""
    return isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and not isinstance(
        test.comparisons[0].operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn))


WRAPPERS = ("_mend_restore_exceptions", "_mend_boundary")


def _compile_boundaries(ctx: FileContext, wrapper: str = "_mend_restore_exceptions") -> list[tuple[cst.CSTNode, object]]:
    """Edits wrapping each torch.compile boundary of the file with ``wrapper``."""
    edits: list[tuple[cst.CSTNode, object]] = []
    ctx.prepare_all()
    for node in walk(ctx.module):
        if isinstance(node, cst.FunctionDef):
            decos = list(node.decorators)
            names = [ctx.imports.qualify(d.decorator.func if isinstance(d.decorator, cst.Call) else d.decorator)
                     for d in decos]
            if "torch.compile" in names and wrapper not in names:
                new_decos = [cst.Decorator(decorator=cst.Name(wrapper))] + decos
                edits.append((node, lambda upd, nd=new_decos: upd.with_changes(
                    decorators=[nd[0]] + list(upd.decorators))))
        elif isinstance(node, cst.Call) and ctx.imports.qualify(node.func) == "torch.compile":
            parent = ctx.parent(node)
            if isinstance(parent, cst.Decorator):
                continue
            if isinstance(parent, cst.Arg) and isinstance(ctx.parent(parent), cst.Call) and \
                    dotted(ctx.parent(parent).func) in (wrapper, "_mend_boundary"):
                continue
            if not node.args:
                continue
            edits.append((node, lambda upd: cst.Call(func=cst.Name(wrapper), args=[cst.Arg(value=upd)])))
    return edits

