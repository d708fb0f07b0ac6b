"""Families 2 and 3: data-dependent branches -> ``torch.where``; validation guards -> in-graph checks.

Branches (MND201). Accepted shapes, over a whole ``if``/``elif``/``else`` chain:

* every branch body is simple statements: assignments of side-effect-free expressions to plain
  names, ``pass``, or (in every branch) a final ``return <expr>``;
* the conditions lower to bool tensors: ``and``/``or``/``not`` become ``torch.logical_*``,
  ``.item()`` is dropped, comparisons on tensors stay; a leading *static* prefix of an ``and`` chain
  (``h.dtype == torch.float16 and ...``) stays a Python ``if`` around the repaired code;
* a name updated in some branches must already hold a tensor before the ``if`` (or be assigned in
  every branch of a chain that ends in ``else``).

Output: conditions are computed first (as in the original, before any branch runs), then each
assignment becomes ``x = torch.where(cond, new, x)`` in order, which is exact for mutually exclusive
branches. ``torch.where`` computes both sides: values are unchanged, and the fix is *safe* when each
updated value is an elementwise, bounded-derivative function (clamp, nan_to_num, masked_fill, +, -)
of the name it replaces; otherwise it is unsafe (broadcasting and shapes cannot be proven). When a
value's gradient could be infinite on the unselected side, the original code is kept under
``torch.is_grad_enabled()`` (GraphMend's gate), so autograd sees exactly the original branch.

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

import builtins

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import (
    BOOL_PRODUCERS,
    FunctionFacts,
    body_statements,
    code,
    dotted,
    is_container_or_none,
    names_in,
    parse_expr,
    parse_stmt,
    strip_parens,
    walk,
)
from mend.rewriter.engine import Decline, FileContext, Plan


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

    def __call__(self, expr: cst.BaseExpression) -> str:
        expr = strip_parens(expr)
        t = self.torch
        if isinstance(expr, cst.BooleanOperation):
            fn = "logical_and" if isinstance(expr.operator, cst.And) else "logical_or"
            return f"{t}.{fn}({self(expr.left)}, {self(expr.right)})"
        if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
            return f"{t}.logical_not({self(expr.expression)})"
        expr = _drop_item(expr)
        if not self.facts.reads_data(expr):
            raise _Declined(f"`{code(expr)}` is not a tensor condition; only a leading static part "
                            "of an `and` chain can stay in Python")
        if isinstance(expr, cst.Call):
            qual = self.facts.imports.qualify(expr.func) or ""
            if qual in {"torch.equal", "torch.allclose"} or (
                isinstance(expr.func, cst.Attribute) and expr.func.attr.value in {"equal", "allclose", "tolist"}
            ):
                raise _Declined("`torch.equal`/`allclose` return Python bools; no tensor form here")
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
            if name in BOOL_PRODUCERS:
                return code(expr)
        return f"({code(expr)}).bool()" if not isinstance(expr, (cst.Name, cst.Call, cst.Attribute)) \
            else f"{code(expr)}.bool()"


class _DropItem(cst.CSTTransformer):
    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.BaseExpression:
        if isinstance(updated_node.func, cst.Attribute) and updated_node.func.attr.value == "item" \
                and not updated_node.args:
            return updated_node.func.value
        return updated_node


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

    flat(test)
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


def fix_branch(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    node = ctx.find((cst.If, cst.IfExp, cst.While), diag)
    if node is None:
        return Decline(diag, "could not find the branch at this position")
    if isinstance(node, cst.While):
        return Decline(diag, "data-dependent `while` loops need torch._higher_order_ops.while_loop; "
                             "not rewritten automatically")
    func = ctx.enclosing_function(node)
    facts = ctx.facts(func)
    torch, imports = ctx.torch_name()
    lower = _Lower(facts, torch)
    try:
        if isinstance(node, cst.IfExp):
            return _fix_ifexp(ctx, diag, node, facts, lower, imports)
        return _fix_if(ctx, diag, _top_if(ctx, node), facts, lower, torch, imports)
    except _Declined as exc:
        return Decline(diag, str(exc))


def _fix_ifexp(ctx, diag, node: cst.IfExp, facts, lower, imports) -> Plan | Decline:
    if not (facts.is_pure(node.body) and facts.is_pure(node.orelse)):
        raise _Declined("a side of the conditional expression has calls mend cannot prove pure")
    for side in (node.body, node.orelse):
        if is_container_or_none(side):
            raise _Declined("a side of the conditional expression is not a tensor value")
    if not (facts.is_tensor(node.body) or facts.is_tensor(node.orelse)):
        raise _Declined("cannot prove either side of the conditional expression is a tensor")
    cond = lower(node.test)
    new = parse_expr(f"{lower.torch}.where({cond}, {code(strip_parens(node.body))}, "
                     f"{code(strip_parens(node.orelse))})")
    new = new.with_changes(lpar=node.lpar, rpar=node.rpar)
    return Plan(diag, "conditional expression -> torch.where", "unsafe", [(node, new)], imports=imports)


def _fix_if(ctx: FileContext, diag: Diagnostic, node: cst.If, facts: FunctionFacts, lower: _Lower,
            torch: str, imports: list) -> Plan | Decline:
    branches, orelse = _chain(node)
    if orelse is None and isinstance(node.orelse, cst.Else):
        orelse = node.orelse.body
    if len(branches) == 1 and orelse is None and ctx.options.side_effects == "guard":
        guarded = _fix_reporting_if(ctx, diag, node, facts, imports)
        if guarded is not None:
            return guarded
    static_prefix: list = []
    if len(branches) == 1 and orelse is None:
        static_prefix, rest = _split_static_prefix(branches[0][0], facts)
        if static_prefix:
            if not rest:
                raise _Declined("the condition has no tensor part mend can see")
            rest_expr = rest[0]
            for r in rest[1:]:
                rest_expr = cst.BooleanOperation(left=rest_expr, operator=cst.And(), right=r)
            branches = [(rest_expr, branches[0][1])]
    else:
        for test, _ in branches:
            prefix, _rest = _split_static_prefix(test, facts)
            if prefix:
                raise _Declined("a static prefix of an `and` chain is kept in Python only for a single "
                                "`if` without `else`")
    bodies = []
    for _, body in branches:
        stmts = body_statements(body)
        if stmts is None:
            raise _Declined("a branch holds a nested compound statement (if/for/with/try)")
        bodies.append(stmts)
    else_stmts = None
    if orelse is not None:
        else_stmts = body_statements(orelse)
        if else_stmts is None:
            raise _Declined("the else branch holds a nested compound statement")
    all_bodies = bodies + ([else_stmts] if else_stmts is not None else [])

    # Returns: every branch ends in `return`, and the chain is complete (else, or the next statement).
    ends_in_return = [bool(b) and isinstance(b[-1], cst.Return) for b in all_bodies]
    follow_return = None
    if any(ends_in_return):
        if not all(ends_in_return):
            raise _Declined("only some branches return")
        if else_stmts is None:
            follow_return = _next_return(ctx, node)
            if follow_return is None:
                raise _Declined("the branches return but the code after the `if` does not")
    needs_cond = False
    for b in all_bodies:
        for s in b[:-1] if (b and isinstance(b[-1], cst.Return)) else b:
            if isinstance(s, cst.Return):
                raise _Declined("a return in the middle of a branch")
            if not (_is_pass(s) or isinstance(s, cst.Assign)):
                kind = type(s).__name__
                if isinstance(s, cst.AugAssign):
                    raise _Declined("augmented assignment (`x += ...`) may update a tensor in place; "
                                    "rewrite it as `x = x + ...` first")
                if isinstance(s, cst.Raise):
                    raise _Declined("a branch raises (a validation guard is MND203)")
                raise _Declined(f"a branch holds a {kind} statement with possible side effects")
            if isinstance(s, cst.Assign):
                if len(s.targets) != 1 or not isinstance(s.targets[0].target, cst.Name):
                    raise _Declined("only assignments to plain names are predicated")
                if not facts.is_pure(s.value):
                    if not _cond_pure(facts, s.value):
                        raise _Declined(f"`{code(s.value)}` has calls mend cannot prove side-effect free "
                                        "(only torch/F./tensor-method calls and submodule calls "
                                        "`self.m(...)` can move into torch.cond)")
                    needs_cond = True
                if is_container_or_none(s.value):
                    raise _Declined(f"`{code(s.value)}` is not a tensor value")
    for test, _ in branches:
        if not facts.is_pure(_drop_item(test)):
            raise _Declined("the condition has calls mend cannot prove side-effect free")

    if needs_cond:
        if any(ends_in_return):
            raise _Declined("a branch with submodule calls returns; torch.cond is applied only to "
                            "branches that assign names")
        if len(branches) != 1 or static_prefix:
            raise _Declined("branches with submodule calls are moved into torch.cond only for a "
                            "plain `if`/`else` (no elif, no static `and` prefix)")
        return _fix_cond(ctx, diag, node, facts, lower(branches[0][0]), bodies[0], else_stmts, torch, imports)

    conds = [lower(test) for test, _ in branches]
    stmt_texts: list[str] = []
    safe = True
    needs_grad_gate = False
    where = f"{torch}.where"

    # Names used after the chain are "live"; other assigned names are branch-local temporaries.
    chain_names = names_in(node)
    if follow_return is not None:
        chain_names |= names_in(follow_return)

    if any(ends_in_return):
        ret_vals = [b[-1].value for b in bodies]
        if else_stmts is not None:
            ret_vals.append(else_stmts[-1].value)
        else:
            ret_vals.append(follow_return.value)
        if any(v is None or is_container_or_none(v) for v in ret_vals):
            raise _Declined("a branch returns a non-tensor value")
        for v in ret_vals:
            if not facts.is_pure(v):
                hint = (" (a branch that returns is not moved into torch.cond; assign the value and "
                        "return it after the `if`)") if _cond_pure(facts, v) else ""
                raise _Declined(f"`{code(v)}` has calls mend cannot prove side-effect free{hint}")
        assigned: dict[str, int] = {}
        for b in all_bodies:
            for s in b[:-1]:
                if isinstance(s, cst.Assign):
                    n = s.targets[0].target.value
                    assigned[n] = assigned.get(n, 0) + 1
        if any(c > 1 for c in assigned.values()):
            raise _Declined("the same temporary is assigned in several branches")
        for b in all_bodies:
            for s in b[:-1]:
                if isinstance(s, cst.Assign):
                    stmt_texts.append(code(s).strip())
        if not any(facts.is_tensor(v) for v in ret_vals):
            raise _Declined("cannot prove any returned value is a tensor")
        expr = code(strip_parens(ret_vals[-1]))
        for cond, v in reversed(list(zip(conds, ret_vals[:-1]))):
            expr = f"{where}({cond}, {code(strip_parens(v))}, {expr})"
        stmt_texts.append(f"return {expr}")
        safe = False
        needs_grad_gate = not all(facts.is_grad_safe(v) for v in ret_vals)
    else:
        # Assignments.
        if len(conds) == 1:
            cond_names = [conds[0]]
        else:
            cond_names = []
        cond_vars: list[str] = []
        if len(conds) > 1 or _needs_hoist(bodies, branches):
            prev = None
            for c in conds:
                var = ctx.fresh("cond")
                if prev is None:
                    stmt_texts.append(f"{var} = {c}")
                    prev = var
                else:
                    stmt_texts.append(f"{var} = {torch}.logical_and({torch}.logical_not({prev}), {c})")
                    prev = f"{torch}.logical_or({prev}, {var})"
                cond_vars.append(var)
            if else_stmts is not None:
                var = ctx.fresh("cond")
                stmt_texts.append(f"{var} = {torch}.logical_not({prev})")
                cond_vars.append(var)
        else:
            cond_vars = cond_names + ([f"{torch}.logical_not({conds[0]})"] if else_stmts is not None else [])
        live_after = _names_read_after(ctx, node, facts)
        for k, body in zip(cond_vars, all_bodies):
            for s in body:
                if _is_pass(s):
                    continue
                name = s.targets[0].target.value
                value = s.value
                temp = name not in live_after and not _defined_before(ctx, facts, name, node)
                if temp:
                    stmt_texts.append(f"{name} = {code(strip_parens(value))}")
                    continue
                if not _defined_before(ctx, facts, name, node):
                    if else_stmts is None or not all(_assigns(b, name) for b in all_bodies):
                        raise _Declined(f"`{name}` is not defined before the `if`, so its old value "
                                        "cannot be the other side of torch.where")
                    raise _Declined(f"`{name}` is first assigned inside the branches")
                if not (facts.is_tensor(value) or name in facts.tensor_names):
                    raise _Declined(f"cannot prove `{name}` holds a tensor")
                stmt_texts.append(f"{name} = {where}({k}, {code(strip_parens(value))}, {name})")
                elementwise = name in names_in(value) and facts.is_grad_safe(value)
                safe &= elementwise
                needs_grad_gate |= not facts.is_grad_safe(value)
    new_stmts = [parse_stmt(t + "\n") for t in stmt_texts]
    if static_prefix:
        new_stmts = [cst.If(test=parse_expr(_and_text(static_prefix)),
                            body=cst.IndentedBlock(body=new_stmts))]
    if needs_grad_gate:
        orig = node.with_changes(leading_lines=[])
        gate = cst.If(test=parse_expr(f"{torch}.is_grad_enabled()"),
                      body=cst.IndentedBlock(body=[orig]),
                      orelse=cst.Else(body=cst.IndentedBlock(body=new_stmts)))
        new_stmts = [gate]
    new_stmts[0] = new_stmts[0].with_changes(leading_lines=node.leading_lines)
    comments = _comments_of(node)
    if comments:
        new_stmts[0] = new_stmts[0].with_changes(
            leading_lines=list(new_stmts[0].leading_lines) + comments)
    edits: list = [(node, cst.FlattenSentinel(new_stmts))]
    if follow_return is not None:
        edits.append((follow_return_line(ctx, follow_return), cst.RemovalSentinel.REMOVE))
    what = "returns" if any(ends_in_return) else "assignments"
    msg = f"data-dependent branch ({what}) -> torch.where"
    if needs_grad_gate:
        msg += " (original kept when grad is enabled)"
    return Plan(diag, msg, "safe" if safe else "unsafe", edits, imports=imports)


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

    Guarded like the report itself (the ``guard`` side-effect policy): eager evaluates the condition and
    reports exactly as before; under compile neither runs, so nothing leaves the graph. **Safe** when the
    condition has no side effects. None when the body is not only reporting calls.
    """
    from mend.rewriter.fixes.side_effects import _guard_test, _is_reporting_call

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
    guarded = cst.If(test=parse_expr(test), body=cst.IndentedBlock(body=[node.with_changes(leading_lines=[])]),
                     leading_lines=node.leading_lines)
    return Plan(diag, f"the check only decides whether to report: guard the whole `if` with `if {test}:` "
                      "(eager unchanged, neither runs under compile)", "safe", [(node, guarded)],
                imports=imports + more)


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
    split = cst.If(
        test=parse_expr(f"not {torch}.compiler.is_compiling()"),
        body=cst.IndentedBlock(body=[node.with_changes(leading_lines=[])]),
        orelse=cst.Else(body=cst.IndentedBlock(body=compiled)),
        leading_lines=node.leading_lines,
    )
    return Plan(diag, "data-dependent branch with submodule calls -> torch.cond under compile "
                      "(eager keeps the if)", "unsafe", [(node, split)], imports=imports)


def _comments_of(node: cst.If) -> list[cst.EmptyLine]:
    """Comment lines inside the branches, kept above the repaired code."""
    out = []
    for n in walk(node):
        if isinstance(n, cst.EmptyLine) and n.comment is not None and n not in node.leading_lines:
            out.append(cst.EmptyLine(comment=n.comment))
        if isinstance(n, cst.TrailingWhitespace) and n.comment is not None:
            out.append(cst.EmptyLine(comment=n.comment))
    return out


def _assigns(body, name: str) -> bool:
    return any(isinstance(s, cst.Assign) and s.targets[0].target.value == name for s in body)


def _needs_hoist(bodies, branches) -> bool:
    """The condition must be computed once, before a branch assignment changes what it reads."""
    if sum(1 for b in bodies for s in b if not _is_pass(s)) > 1:
        return True
    return False


def _names_read_after(ctx: FileContext, node: cst.If, facts: FunctionFacts) -> set[str]:
    end = ctx.positions[node].end.line
    out = set()
    for name, uses in facts.loads.items():
        if any(ctx.positions[u].start.line > end for u in uses if u in ctx.positions):
            out.add(name)
    # A loop around the if may read the name again on the next iteration.
    for anc in ctx.ancestors(node):
        if isinstance(anc, (cst.For, cst.While)):
            out |= names_in(anc)
        if isinstance(anc, cst.FunctionDef):
            break
    return out


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


def follow_return_line(ctx: FileContext, ret: cst.Return) -> cst.CSTNode:
    return ctx.parent(ret)


# --- validation guards ----------------------------------------------------------------------------

def fix_validation(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    node = ctx.find(cst.If, diag)
    if node is None:
        if ctx.find(cst.Assert, diag) is not None:
            return Decline(diag, "an assert on a tensor is traced without a break; nothing to repair")
        return Decline(diag, "could not find the `if ...: raise` at this position")
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
    msg_node = exc.args[0].value
    if not isinstance(msg_node, (cst.SimpleString, cst.ConcatenatedString)):
        return Decline(diag, "the message is not a string literal (f-strings and formatting are not kept)")
    message = msg_node.evaluated_value
    if not isinstance(message, str):
        return Decline(diag, "the message is not a text literal")
    if ctx.in_try(node):
        return Decline(diag, "the guard is inside a `try` in the same function; the moved check could "
                             "not be caught there")
    if not facts.is_pure(_drop_item(node.test)):
        return Decline(diag, "the condition has calls mend cannot prove side-effect free")
    torch, imports = ctx.torch_name()
    helpers = []
    test = strip_parens(node.test)
    try:
        cond = _validation_cond(test, facts, torch, helpers)
    except _Declined as exc_:
        return Decline(diag, str(exc_))
    marker = f"[mend:{exc_name}] {message}"
    assert_text = f"{torch}._assert_async({torch}.logical_not({cond}), {marker!r})"
    split = cst.If(
        test=parse_expr(f"not {torch}.compiler.is_compiling()"),
        body=cst.IndentedBlock(body=[node.with_changes(leading_lines=[])]),
        orelse=cst.Else(body=cst.IndentedBlock(body=[parse_stmt(assert_text + "\n")])),
        leading_lines=node.leading_lines,
    )
    edits: list = [(node, split)]
    boundaries = _compile_boundaries(ctx)
    for target, repl in boundaries:
        edits.append((target, repl))
    if boundaries:
        helpers.append("_mend_restore_exceptions")
    where = "restored at this file's compile boundary" if boundaries else (
        "raised as RuntimeError('[mend:...]') unless the caller wraps its compiled object with "
        "mend.rewriter.runtime.restore_exceptions")
    return Plan(diag, f"validation guard -> {torch}._assert_async under compile ({exc_name} {where})",
                "unsafe", edits, imports=imports, helpers=helpers)


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
    return _Lower(facts, torch)(test)


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

