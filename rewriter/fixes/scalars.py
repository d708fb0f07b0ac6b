"""MND3xx: Python scalars from tensors and data-dependent shapes.

* ``.item()`` (MND301) whose value only feeds tensor arithmetic keeps the 0-d tensor: the ``.item()``
  is dropped and ``max(n, c)``/``min(n, c)`` around it become ``torch.clamp``. Unsafe: the 0-d tensor
  keeps its dtype, so arithmetic on it rounds there (``n / 3`` in float16) and type promotion differs
  from a Python number's (a float number meeting an integer tensor, two 0-d tensors, ``max(n, 1.5)``
  of an integer). Otherwise, unsafe: scalar capture for that site only (:mod:`mend.rewriter.fixes.capture`).
* ``assert t.item() <op> n`` / ``assert t.item()`` (MND301) -> ``assert t <op> n``: Dynamo turns an assert on
  a tensor into an in-graph ``torch._assert_async`` (unsafe: a failing check raises ``RuntimeError`` under
  compile, asynchronously on CUDA, and the comparison runs in the tensor's dtype).
* ``float(t)``/``int(t)`` (MND302) in arithmetic with a tensor -> ``t`` (unsafe: 0-d tensor promotion
  differs from Python numbers for mixed int/float operands), else scalar capture for that site (unsafe).
  A tensor check ``torch._check_tensor_all(cond)`` (MND302): scalar capture for the call, which Dynamo
  then keeps as a runtime assert (unsafe: the error of a failing check depends on the backend).
* ``len(t.tolist())`` (MND303) -> ``_mend_tolist_len(t)``: ``t.shape[0]``, and the original for a 0-d
  ``t`` (whose list is a number: ``len()`` raises TypeError there) (safe, exact).
* ``t[mask].sum()`` / ``.mean()`` (MND305), with elementwise methods in between, ->
  ``_mend_masked_sum(t, mask)`` / ``_mend_masked_mean(t, mask)``: eager runs the original expression;
  under compile a static-shape ``torch.where`` sum (equal up to float reduction order; a dtype
  ``mean()`` rejects runs the original, which raises as before). Other mask/nonzero/unique uses (MND304/305): unsafe
  dynamic-shape capture for that site only (:mod:`mend.rewriter.fixes.capture`).
* ``t[torch.where(m)] = v`` (MND304) with a boolean ``m`` -> ``t[m] = v`` (unsafe: the same elements get the same
  values; where ``m``'s shape is not ``t``'s leading dimensions the repair raises ``IndexError``, the original
  only for an index out of range).
"""

from __future__ import annotations

from dataclasses import replace

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import ELEMENTWISE_METHODS, TENSOR_CHECKS, TOTAL_REDUCTIONS
from mend.rewriter.analysis import code, is_number, names_in, parse_expr, strip_parens, walk
from mend.rewriter.engine import Decline, FileContext, Plan
from mend.rewriter.fixes.base import fixer
from mend.rewriter.fixes.capture import capture_plan, tensor_check_plan
from mend.rewriter.fixes.control_flow import fix_branch, validation_plan
from mend.rewriter.fixes.expert_split import expert_split_plan
from mend.rewriter.fixes.grouped_rows import grouped_rows_plan
from mend.rewriter.fixes.moe import expert_loop_plan, routed_store_plan


def _is_method(node: cst.CSTNode, name: str) -> bool:
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == name \
        and not node.args


def _tensor_operand(ctx: FileContext, facts, node: cst.CSTNode) -> bool:
    """``node`` is an operand of arithmetic whose other operand is a provable tensor."""
    parent = ctx.parent(node)
    if isinstance(parent, cst.BinaryOperation):
        other = parent.right if parent.left is node else parent.left
        return facts.is_tensor(other) or _tensor_operand(ctx, facts, parent)
    return False


# Why keeping the 0-d tensor is unsafe: a tensor's dtype takes part in type promotion and rounding
# where the Python number's would not (docs/rules/MND301.md).
PROMOTES = (" (unsafe: the 0-d tensor keeps its dtype, so arithmetic on it rounds in that dtype and type "
            "promotion can change the result's dtype)")


@fixer("MND301")
def fix_item(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    call = ctx.find(cst.Call, diag, pred=lambda n: _is_method(n, "item"))
    if call is None:
        return Decline(diag, "could not find `.item()` at this position")
    func = ctx.enclosing_function(call)
    facts = ctx.facts(func)
    receiver = call.func.value
    parent = ctx.parent(call)
    why = "the Python number is used outside tensor arithmetic"
    assert_stmt = _assert_truth(ctx, call)
    if isinstance(assert_stmt, str):
        return Decline(diag, assert_stmt)
    if assert_stmt is not None:
        return Plan(diag, "assert on the tensor: drop `.item()` (Dynamo keeps a tensor assert in the graph)",
                    "unsafe", [(call, receiver.with_changes(lpar=call.lpar, rpar=call.rpar) if call.lpar
                                else receiver)])
    eager_only = _eager_only_plan(ctx, diag, facts, call) or _validation_count_plan(ctx, diag, facts, call)
    if eager_only is not None:
        return eager_only
    if _in_branch_test(ctx, call):
        return fix_branch(ctx, diag)  # branching on `.item()`: predicate the branch on the tensor
    if _tensor_operand(ctx, facts, call):
        return Plan(diag, f"keep the 0-d tensor: drop `.item()` in tensor arithmetic{PROMOTES}", "unsafe",
                    [(call, receiver.with_changes(lpar=call.lpar, rpar=call.rpar) if call.lpar else receiver)])
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        name = parent.targets[0].target.value
        if len(facts.stores.get(name, [])) == 1:
            edits: list = [(call, receiver)]
            torch, imports = ctx.torch_name()
            ok = bool(facts.loads.get(name))
            for use in facts.loads.get(name, []):
                up = ctx.parent(use)
                if isinstance(up, cst.Arg) and isinstance(ctx.parent(up), cst.Call):
                    mm = ctx.parent(up)
                    fname = code(mm.func)
                    others = [a.value for a in mm.args if a is not up]
                    if fname in {"max", "min"} and len(mm.args) == 2 and all(is_number(o) for o in others) \
                            and _tensor_operand(ctx, facts, mm):
                        kw = "min" if fname == "max" else "max"
                        edits.append((mm, parse_expr(f"{torch}.clamp({name}, {kw}={code(others[0])})")))
                        continue
                    ok = False
                    break
                if not _tensor_operand(ctx, facts, use):
                    ok = False
                    break
            if ok:
                return Plan(diag, f"keep `{name}` a 0-d tensor: it only feeds tensor arithmetic{PROMOTES}",
                            "unsafe", edits, imports=imports)
    return capture_plan(ctx, diag, call, "capture_scalar_outputs", why)


def _counted_item(ctx: FileContext, facts, call: cst.Call) -> tuple[str, cst.BaseExpression] | None:
    """``(n, t.sum())`` for ``n = t.sum().item()`` stored once, whose ``.item()`` of a full reduction of an
    expression that cannot raise (``is_total``) cannot raise either."""
    stmt = ctx.parent(call)
    if not (isinstance(stmt, cst.Assign) and stmt.value is call and len(stmt.targets) == 1
            and isinstance(stmt.targets[0].target, cst.Name)):
        return None
    name = stmt.targets[0].target.value
    receiver = strip_parens(call.func.value)
    if len(facts.stores.get(name, [])) != 1 or not facts.loads.get(name) or not (
            isinstance(receiver, cst.Call) and isinstance(receiver.func, cst.Attribute)
            and receiver.func.attr.value in TOTAL_REDUCTIONS and not receiver.args and facts.is_total(receiver)):
        return None
    return name, receiver


def _eager_only_value(call: cst.Call, torch: str) -> cst.BaseExpression:
    return parse_expr(f"{code(call)} if not {torch}.compiler.is_compiling() else None")


def _eager_only_plan(ctx: FileContext, diag: Diagnostic, facts, call: cst.Call) -> Plan | None:
    """``n = (ids == k).sum().item()`` whose every read runs only in eager (``if not is_torchdynamo_compiling()
    and n != m: raise ...``, Qwen2-VL's token count): compiled code never reads ``n``, so only eager computes
    it. Safe: eager runs the statement as written, and the ``.item()`` skipped under compile could not raise."""
    counted = _counted_item(ctx, facts, call)
    if counted is None or not all(ctx.eager_only(u) for u in facts.loads[counted[0]]):
        return None
    torch, imports = ctx.torch_name()
    return Plan(diag, f"compute `{counted[0]}` only in eager: every read of it runs only in eager", "safe",
                [(call, _eager_only_value(call, torch))], imports=imports)


def _validation_count_plan(ctx: FileContext, diag: Diagnostic, facts, call: cst.Call) -> Plan | None:
    """``n = (ids == k).sum().item()`` read only by one validation (``if n != m: raise ValueError(f"...{n}")``,
    Qwen2.5-VL's and Qwen2-Audio's token counts): eager keeps both; under compile the count stays a tensor
    inside the MND203 repair of the check (``torch._assert_async``) and ``n`` is not computed."""
    counted = _counted_item(ctx, facts, call)
    if counted is None:
        return None
    name, receiver = counted
    guards = {id(g): g for g in (_enclosing_if(ctx, u) for u in facts.loads[name])}
    guard = next(iter(guards.values())) if len(guards) == 1 else None
    if guard is None or not any(u.value == name for u in walk(guard.test) if isinstance(u, cst.Name)):
        return None
    compiled_test = guard.test.visit(_Substitute(name, receiver))  # a call: an atom wherever it goes
    plan = validation_plan(ctx, diag, guard, compiled_test)
    if isinstance(plan, Decline):
        return None  # not a validation this repair can move: the other repairs of `.item()` are tried
    torch, _ = ctx.torch_name()
    return replace(plan, message=f"{plan.message}; the count `{name}` is computed only in eager",
                   edits=[(call, _eager_only_value(call, torch)), *plan.edits])


def _enclosing_if(ctx: FileContext, node: cst.CSTNode) -> cst.If | None:
    for anc in ctx.ancestors(node):
        if isinstance(anc, cst.If):
            return anc
        if isinstance(anc, (cst.FunctionDef, cst.Lambda)):
            return None
    return None


class _Substitute(cst.CSTTransformer):
    """Every read of ``name`` replaced by ``value``."""

    def __init__(self, name: str, value: cst.BaseExpression) -> None:
        super().__init__()
        self.name, self.value = name, value

    def leave_Name(self, original: cst.Name, updated: cst.Name) -> cst.BaseExpression:
        return self.value if original.value == self.name else updated


def _assert_truth(ctx: FileContext, call: cst.Call) -> cst.Assert | str | None:
    """The ``assert`` whose truth value is all that ``call`` (an ``.item()``) feeds, a decline reason, or None.

    ``assert t.item()`` and ``assert t.item() <= n`` (one comparison operator, either side) qualify when
    the message is absent or a plain string literal: Dynamo turns ``assert <tensor>`` into an in-graph
    ``torch._assert_async`` (measured on torch 2.13: one graph), but breaks on ``not``, ``and``/``or``,
    chained comparisons and formatted messages, so those are declined.
    """
    node: cst.CSTNode = call
    parent = ctx.parent(node)
    if isinstance(parent, cst.ComparisonTarget):
        node = ctx.parent(parent)
        parent = ctx.parent(node)
    elif isinstance(parent, cst.Comparison) and parent.left is node:
        node = parent
        parent = ctx.parent(node)
    if not isinstance(parent, cst.Assert) or parent.test is not node:
        for anc in ctx.ancestors(call):
            if isinstance(anc, cst.Assert):
                if _in_test(ctx, call, anc):
                    return ("`assert` on `.item()` is kept in the graph only as `assert t` or `assert t <op> x` "
                            "(one comparison, no `not`/`and`/`or`): Dynamo breaks on the other forms")
                return None
            if isinstance(anc, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
                return None
        return None
    if isinstance(node, cst.Comparison) and len(node.comparisons) != 1:
        return "a chained comparison on `.item()` in an `assert` needs Python's `and` on tensors (a break)"
    if isinstance(node, cst.Comparison) and not isinstance(
            node.comparisons[0].operator, (cst.LessThan, cst.LessThanEqual, cst.GreaterThan,
                                           cst.GreaterThanEqual, cst.Equal, cst.NotEqual)):
        return "only `<`, `<=`, `>`, `>=`, `==`, `!=` comparisons on `.item()` in an `assert` are rewritten"
    msg = parent.msg
    if msg is not None and not isinstance(msg, (cst.SimpleString, cst.ConcatenatedString)):
        return "the `assert` message is computed (Dynamo breaks on a formatted message under a tensor assert)"
    return parent


def _in_test(ctx: FileContext, node: cst.CSTNode, stmt: cst.CSTNode) -> bool:
    test = getattr(stmt, "test", None)
    if test is None:
        return False
    cur = node
    while cur is not None and cur is not stmt:
        if cur is test:
            return True
        cur = ctx.parent(cur)
    return False


def _in_branch_test(ctx: FileContext, call: cst.Call) -> bool:
    """``call`` is part of the test of the ``if``/``while``/conditional expression around it."""
    for anc in ctx.ancestors(call):
        if isinstance(anc, (cst.If, cst.While, cst.IfExp)) and _in_test(ctx, call, anc):
            return True
        if isinstance(anc, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return False
    return False


@fixer("MND302")
def fix_number(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    check = ctx.find(cst.Call, diag, pred=lambda n: ctx.imports.qualify(n.func) in TENSOR_CHECKS)
    if check is not None:
        return _check_plan(ctx, diag, check)
    call = ctx.find(cst.Call, diag, pred=lambda n: isinstance(n.func, cst.Name)
                    and n.func.value in {"float", "int", "bool"} and len(n.args) == 1)
    if call is None:
        return Decline(diag, "only `float(t)`/`int(t)`/`bool(t)` are repaired (math.* needs the tensor form)")
    if call.func.value in {"float", "bool"} and _in_branch_test(ctx, call):
        return fix_branch(ctx, diag)  # branching on a tensor's truth or value: predicate the branch
    if call.func.value == "bool":
        return Decline(diag, "`bool(t)` outside a branch test needs a Python bool; not rewritten")
    facts = ctx.facts(ctx.enclosing_function(call))
    arg = call.args[0].value
    if call.func.value == "float" and _tensor_operand(ctx, facts, call):
        return Plan(diag, "keep the 0-d tensor instead of `float(t)` in tensor arithmetic", "unsafe",
                    [(call, arg)])
    return capture_plan(ctx, diag, call, "capture_scalar_outputs",
                              "the Python number is used outside tensor arithmetic")


def _check_plan(ctx: FileContext, diag: Diagnostic, check: cst.Call) -> Plan | Decline:
    """``torch._check_tensor_all(cond[, message])``: scalar capture for the call, unless its message is a
    closure over names (Dynamo takes only a message function whose closure holds constants)."""
    message = next((a.value for a in check.args if a.keyword is not None and a.keyword.value == "message"), None)
    position = 3 if ctx.imports.qualify(check.func).endswith("_with") else 2
    if message is None and len(check.args) >= position and check.args[position - 1].keyword is None:
        message = check.args[position - 1].value
    if message is not None and not (isinstance(message, cst.Lambda) and not names_in(message.body)):
        return Decline(diag, "the check's message reads names (Dynamo takes only a message function whose closure "
                             "holds constants; capture would break there again)")
    return tensor_check_plan(ctx, diag, check)


@fixer("MND303")
def fix_tolist(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    call = ctx.find(cst.Call, diag, pred=lambda n: _is_method(n, "tolist"))
    if call is None:
        return Decline(diag, "could not find `.tolist()` at this position")
    parent = ctx.parent(call)
    outer = ctx.parent(parent) if isinstance(parent, cst.Arg) else None
    if isinstance(outer, cst.Call) and isinstance(outer.func, cst.Name) and outer.func.value == "len" \
            and len(outer.args) == 1:
        new = parse_expr(f"_mend_tolist_len({code(strip_parens(call.func.value))})")
        return Plan(diag, "`len(t.tolist())` -> `_mend_tolist_len(t)` (`t.shape[0]`; a 0-d `t` raises as before)",
                    "safe", [(outer, new)], helpers=["_mend_tolist_len"])
    grouped = expert_split_plan(ctx, diag, call)
    if grouped is not None:
        return grouped
    return capture_plan(ctx, diag, call, "capture_scalar_outputs",
                              "a Python list is needed (capture helps integer tensors only)")


@fixer("MND305")
def fix_mask(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    sub = ctx.find(cst.Subscript, diag)
    if sub is None:
        return Decline(diag, "could not find the mask index at this position")
    if len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index):
        return Decline(diag, "only a single boolean-mask index is rewritten")
    mask = sub.slice[0].slice.value
    facts = ctx.facts(ctx.enclosing_function(sub))
    chain = []
    cur: cst.CSTNode = sub
    while True:
        attr = ctx.parent(cur)
        call = ctx.parent(attr) if isinstance(attr, cst.Attribute) else None
        if not (isinstance(attr, cst.Attribute) and attr.value is cur and isinstance(call, cst.Call)
                and not call.args):
            break
        meth = attr.attr.value
        if meth in {"sum", "mean"}:
            base = code(sub.value)
            for m in chain:
                base = f"{base}.{m}()"
            helper = f"_mend_masked_{meth}"
            torch, imports = ctx.torch_name()
            if not facts.is_pure(mask) or not facts.is_pure(sub.value):
                return Decline(diag, "the tensor or the mask has calls mend cannot prove side-effect free")
            new = parse_expr(f"{helper}({base}, {code(strip_parens(mask))})")
            return Plan(diag, f"masked reduction `t[mask].{meth}()` -> `{helper}(t, mask)` (static shape)",
                        "safe", [(call, new)], imports=imports, helpers=[helper])
        if meth not in ELEMENTWISE_METHODS:
            break
        chain.append(meth)
        cur = call
    routed = routed_store_plan(ctx, diag, sub)
    if routed is not None:
        return routed
    return capture_plan(ctx, diag, sub, "capture_dynamic_output_shape_ops",
                              "the masked tensor's data-dependent shape is used")


@fixer("MND304")
def fix_dynamic_op(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    call = ctx.find(cst.Call, diag)
    if call is None:
        return Decline(diag, "could not find the call at this position")
    for specific in (expert_loop_plan, grouped_rows_plan):
        routing = specific(ctx, diag, call)
        if routing is not None:
            return routing
    store = _mask_store_plan(ctx, diag, call)
    if store is not None:
        return store
    return capture_plan(ctx, diag, call, "capture_dynamic_output_shape_ops",
                              "the operator's output shape depends on tensor data")



def _mask_store_plan(ctx: FileContext, diag: Diagnostic, call: cst.Call) -> Plan | None:
    """``t[torch.where(m)] = v`` (or ``m.nonzero(as_tuple=True)``) with a boolean ``m`` -> ``t[m] = v``: the same
    elements get the same values, and a boolean-mask store has no data-dependent shape."""
    mask = _where_mask(ctx, call)
    index = ctx.parent(call)
    sub = ctx.parent(ctx.parent(index)) if isinstance(index, cst.Index) else None
    if mask is None or not isinstance(sub, cst.Subscript) or len(sub.slice) != 1:
        return None
    holder = ctx.parent(sub)
    if not (isinstance(holder, cst.AssignTarget) and holder.target is sub):
        return None
    facts = ctx.facts(ctx.enclosing_function(call))
    if not (facts.is_tensor(sub.value) and _is_bool_tensor(facts, mask)) and not _value_comparison(mask):
        return None
    return Plan(diag, "`t[torch.where(m)] = v` -> `t[m] = v`: a boolean-mask store (unsafe: where the mask's shape "
                      "is not the tensor's leading dimensions it raises IndexError)", "unsafe",
                [(call, strip_parens(mask).with_changes(lpar=call.lpar, rpar=call.rpar))])


def _where_mask(ctx: FileContext, call: cst.Call) -> cst.BaseExpression | None:
    if ctx.imports.qualify(call.func) == "torch.where" and len(call.args) == 1 and not call.args[0].keyword:
        return call.args[0].value
    if isinstance(call.func, cst.Attribute) and call.func.attr.value == "nonzero" and len(call.args) == 1:
        arg = call.args[0]
        if arg.keyword is not None and arg.keyword.value == "as_tuple" and code(arg.value) == "True":
            return call.func.value
    return None


def _value_comparison(expr: cst.BaseExpression) -> bool:
    """``a == b`` (``<``, ``!=``, ...) handed to ``torch.where(m)``: where the original runs, it is a tensor
    comparison (``torch.where`` takes nothing else), so a boolean mask, and the store target takes a tuple of
    index tensors, which only tensors and arrays do."""
    expr = strip_parens(expr)
    return isinstance(expr, cst.Comparison) and not any(
        isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons)


def _is_bool_tensor(facts, expr: cst.BaseExpression) -> bool:
    """A comparison of tensors, or ``~``/``&``/``|`` of such (a boolean tensor for certain)."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.Comparison):
        return facts.is_tensor(expr) and _value_comparison(expr)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
        return _is_bool_tensor(facts, expr.expression)
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, (cst.BitAnd, cst.BitOr)):
        return _is_bool_tensor(facts, expr.left) and _is_bool_tensor(facts, expr.right)
    return False
