"""Where each fixable rule's finding sits in the file: the node every strategy of the rule starts from.

A finder returns the node at the diagnostic's position, or a :class:`~mend.rewriter.plan.Decline` (final) when
the site is not one any strategy of the rule repairs: the first strategy of the rule's list returns it, so
the reason is the same whichever strategy comes first. The questions about where a node sits (in an
``if`` test, an operand of tensor arithmetic) are here too.
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import LOGGER_QUERIES, TENSOR_CHECKS
from mend.rewriter.analysis import FunctionFacts, code
from mend.rewriter.context import FileContext
from mend.rewriter.parts.lower import short
from mend.rewriter.plan import Decline

# --- MND101-MND106: a reporting, clock or debugger call statement -------------------------------------


def report_statement(ctx: FileContext, diag: Diagnostic) -> tuple[cst.SimpleStatementLine, cst.Call] | Decline:
    """The statement line holding the call (``time.perf_counter()`` inside ``print(...)``: the ``print``'s
    line) and the call itself."""
    call = ctx.find(cst.Call, diag)
    if isinstance(call, cst.Call) and isinstance(call.func, cst.Attribute) and call.func.attr.value in LOGGER_QUERIES:
        return Decline(diag, f"`.{call.func.attr.value}()` asks about the logger's configuration and its answer "
                             "decides code: no message to keep, no automatic fix (ask it once outside the compiled "
                             "code)")
    stmt = ctx.statement_line(call) if call is not None else None
    if call is None or stmt is None:
        return Decline(diag, "could not find the call statement at this position")
    if ctx.in_compile_guard(stmt):
        return Decline(diag, "already guarded by torch.compiler.is_compiling()")
    if len(stmt.body) != 1:
        return Decline(diag, "several statements share this line; split them first")
    return stmt, call


def call_statement(ctx: FileContext, diag: Diagnostic) -> tuple[cst.SimpleStatementLine, cst.Call] | Decline | None:
    """:func:`report_statement` where the statement is the call itself (``print(x)``, not ``t = time.time()``)."""
    site = report_statement(ctx, diag)
    if isinstance(site, Decline):
        return site
    stmt = site[0]
    small = stmt.body[0]
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        return stmt, small.value
    return None


def side_effect_policy(ctx: FileContext, diag: Diagnostic) -> str:
    """The side-effect policy for ``diag`` (a debugger stop is always guarded: it has no deferred meaning)."""
    return "guard" if diag.code == "MND106" else ctx.options.side_effects


# --- MND201: a data-dependent branch ------------------------------------------------------------------


def branch_node(ctx: FileContext, diag: Diagnostic) -> cst.If | cst.IfExp | Decline:
    node = ctx.find((cst.If, cst.IfExp, cst.While), diag)
    if node is None:
        return Decline(diag, _no_branch(ctx, diag))
    if isinstance(node, cst.While):
        return Decline(diag, "data-dependent `while` loops need torch._higher_order_ops.while_loop; "
                             "not rewritten automatically")
    if ctx.in_compile_guard(node):
        return Decline(diag, "already split by torch.compiler.is_compiling() (the original branch is kept "
                             "where autograd or eager needs it)")
    return node


def _no_branch(ctx: FileContext, diag: Diagnostic) -> str:
    """Why there is no branch to repair at the position: what decides there instead."""
    filt = ctx.find(cst.CompIf, diag)
    if filt is not None:
        comp = next((a for a in ctx.ancestors(filt) if isinstance(a, (cst.ListComp, cst.SetComp, cst.DictComp,
                                                                        cst.GeneratorExp))), None)
        text = code(comp) if comp is None or comp.lpar or not isinstance(comp, cst.GeneratorExp) else f"({code(comp)})"
        whole = f" of `{short(text)}`" if comp is not None else ""
        return (f"the test `{short(code(filt.test))}` filters the elements{whole}: how many it keeps depends on "
                "the data, and mend repairs only `if` statements and conditional expressions")
    stmt = ctx.find((cst.SimpleStatementLine, cst.BaseCompoundStatement), diag)
    where = f" (`{short(code(stmt).strip().splitlines()[0])}`)" if stmt is not None else ""
    return f"no `if`, `while` or conditional expression at this position{where}"


# --- MND301-MND305, MND310/MND311: tensors read as Python numbers, data-dependent shapes ----------------


def is_method(node: cst.CSTNode, name: str) -> bool:
    """``node`` is ``x.name()`` without arguments."""
    return isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) and node.func.attr.value == name \
        and not node.args


def item_call(ctx: FileContext, diag: Diagnostic) -> cst.Call | Decline:
    call = ctx.find(cst.Call, diag, pred=lambda n: is_method(n, "item"))
    return call if call is not None else Decline(diag, "could not find `.item()` at this position")


def tensor_check(ctx: FileContext, diag: Diagnostic) -> cst.Call | None:
    """``torch._check_tensor_all(...)`` at the position (MND302's other site), or None."""
    return ctx.find(cst.Call, diag, pred=lambda n: ctx.imports.qualify(n.func) in TENSOR_CHECKS)


def number_call(ctx: FileContext, diag: Diagnostic) -> cst.Call | Decline:
    """``float(t)`` / ``int(t)`` / ``bool(t)`` at the position."""
    call = ctx.find(cst.Call, diag, pred=lambda n: isinstance(n.func, cst.Name)
                    and n.func.value in {"float", "int", "bool"} and len(n.args) == 1)
    if call is None:
        return Decline(diag, _not_a_number_call(ctx, diag))
    return call


def _not_a_number_call(ctx: FileContext, diag: Diagnostic) -> str:
    """Why an MND302 site without ``float(t)``/``int(t)``/``bool(t)`` is left: what reads the number there."""
    call = ctx.find(cst.Call, diag)
    q = ctx.imports.qualify(call.func) or "" if call is not None else ""
    if q.startswith("math."):
        return (f"`{code(call)}` turns the tensor into a Python number for `{q}`; only `float(t)`/`int(t)`/"
                f"`bool(t)` are repaired (`torch.{q[5:]}` on the tensor keeps it in the graph)")
    sub = ctx.find(cst.Subscript, diag, pred=lambda n: any(isinstance(e.slice, cst.Slice) for e in n.slice))
    if sub is not None:
        return (f"the slice `{code(sub)}` reads a tensor bound as a Python number, not `float(t)`/`int(t)`/"
                f"`bool(t)` (a slice bound is MND311's site)")
    stmt = ctx.statement_line(call) if call is not None else None
    where = f" in `{code(stmt).strip()}`" if stmt is not None else ""
    return f"no `float(t)`/`int(t)`/`bool(t)` at this position{where}: mend does not see what reads the number"


def tolist_call(ctx: FileContext, diag: Diagnostic) -> cst.Call | Decline:
    call = ctx.find(cst.Call, diag, pred=lambda n: is_method(n, "tolist"))
    return call if call is not None else Decline(diag, "could not find `.tolist()` at this position")


def any_call(ctx: FileContext, diag: Diagnostic) -> cst.Call | Decline:
    call = ctx.find(cst.Call, diag)
    return call if call is not None else Decline(diag, "could not find the call at this position")


def mask_index(ctx: FileContext, diag: Diagnostic) -> cst.Subscript | Decline:
    """``t[mask]`` at the position, with one index (the boolean mask)."""
    sub = ctx.find(cst.Subscript, diag)
    if sub is None:
        return Decline(diag, "could not find the mask index at this position")
    if len(sub.slice) != 1 or not isinstance(sub.slice[0].slice, cst.Index):
        return Decline(diag, "only a single boolean-mask index is rewritten", final=False)  # capture may still
    return sub


def masked_subscript(ctx: FileContext, diag: Diagnostic) -> cst.Subscript | Decline:
    """The subscript at the position that indexes by a boolean mask, with any other indices (``t[:, mask]``)."""
    sub = ctx.find(cst.Subscript, diag)
    return sub if sub is not None else Decline(diag, "could not find the mask index at this position")


def size_site(ctx: FileContext, diag: Diagnostic) -> cst.Call | cst.Subscript | Decline:
    """The call or subscript that uses a tensor as a size or bound (MND310/MND311)."""
    node = ctx.find((cst.Call, cst.Subscript), diag)
    return node if node is not None else Decline(diag, "could not find the call or subscript at this position")


def in_test(ctx: FileContext, node: cst.CSTNode, stmt: cst.CSTNode) -> bool:
    """``node`` is part of ``stmt``'s test (an ``if``, ``while``, ``assert`` or conditional expression)."""
    test = getattr(stmt, "test", None)
    if test is None:
        return False
    cur = node
    while cur is not None and cur is not stmt:
        if cur is test:
            return True
        cur = ctx.parent(cur)
    return False


def in_branch_test(ctx: FileContext, call: cst.Call) -> bool:
    """``call`` is part of the test of the ``if``/``while``/conditional expression around it."""
    for anc in ctx.ancestors(call):
        if isinstance(anc, (cst.If, cst.While, cst.IfExp)) and in_test(ctx, call, anc):
            return True
        if isinstance(anc, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
            return False
    return False


def tensor_operand(ctx: FileContext, facts: FunctionFacts, node: cst.CSTNode) -> bool:
    """``node`` is an operand of arithmetic whose other operand is a provable tensor."""
    parent = ctx.parent(node)
    if isinstance(parent, cst.BinaryOperation):
        other = parent.right if parent.left is node else parent.left
        return facts.is_tensor(other) or tensor_operand(ctx, facts, parent)
    return False


__all__ = [
    "any_call", "branch_node", "call_statement", "in_branch_test", "in_test", "is_method", "item_call", "mask_index", "masked_subscript",
    "number_call", "report_statement", "side_effect_policy", "size_site", "tensor_check", "tensor_operand",
    "tolist_call",
]
