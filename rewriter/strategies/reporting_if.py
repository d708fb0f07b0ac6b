"""MND201 / MND101-MND103: ``if <tensor cond>: print/log/warn(...)``: guard the whole ``if``.

The check only decides whether to report. Eager evaluates the condition and reports exactly as before.
Under compile, with the ``keep`` policy, each report becomes ``_mend_emit(__name__, "... 0.when", <condition
as a bool tensor>, ...)``: the graph makes the call where it stood when the condition holds at run time; with
``guard`` nothing is reported under compile. Either way ``_mend_truth(<first tensor operand>)`` asks for the
condition's truth where that can fail (a tensor of many elements raises as in eager). **Safe** when the
condition has no side effects.

The finding at the test (MND201, or MND301 on a ``.item()`` there) and the one at the report inside
(MND101-MND103) share this one repair of the whole ``if`` (the engine recognises the same edit). Tried
under the side-effect policies ``keep`` and ``guard`` (``drop`` and ``defer`` repair the report itself).
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import TOTAL_ELEMENTWISE
from mend.rewriter.analysis import (
    FunctionFacts,
    body_statements,
    code,
    is_literal,
    parse_expr,
    parse_stmt,
    strip_parens,
    walk,
)
from mend.rewriter.context import FileContext
from mend.rewriter.parts.branches import IfSite, branch_chain, if_site
from mend.rewriter.parts.lower import (
    Declined,
    Lower,
    and_text,
    drop_item,
    is_pass,
    no_tensor_part,
    split_static_prefix,
    static_index,
)
from mend.rewriter.parts.reporting import emit_arguments, guard_test, is_reporting_call
from mend.rewriter.parts.sites import call_statement
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND201",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x):
                    if x.sum() > 0:
                        print("positive input")
                    return x * 2
        """,
        after="""
            import torch
            from torch import nn
            from _mend import emit as _mend_emit, truth as _mend_truth


            class M(nn.Module):
                def forward(self, x):
                    if not torch.compiler.is_compiling():
                        if x.sum() > 0:
                            print("positive input")
                    else:
                        _mend_truth(x.sum() > 0)
                        _mend_emit(__name__, "print 0.when", x.sum() > 0, "positive input")
                    return x * 2
        """,
        run="compile(M())(torch.arange(4.0) - 1)",
    ),
)


REPORTS = ("MND101", "MND102", "MND103")


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    if diag.code in REPORTS:  # the report inside the ``if``
        site = call_statement(ctx, diag)
        if not isinstance(site, tuple):
            return site
        return _reporting_if_for(ctx, diag, site[0]) if ctx.options.side_effects in {"guard", "keep"} else None
    found = if_site(ctx, diag)  # the ``if``'s test
    if not isinstance(found, IfSite):
        return found
    branches, orelse = branch_chain(found.node)
    if len(branches) != 1 or orelse is not None or ctx.options.side_effects not in {"guard", "keep"}:
        return None
    try:
        return _fix_reporting_if(ctx, diag, found.node, found.facts, found.imports)
    except Declined as exc:
        return Decline(diag, str(exc))


def _reporting_if_for(ctx: FileContext, diag: Diagnostic, stmt: cst.CSTNode) -> Plan | None:
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
    except Declined:
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
    stmts = body_statements(node.body)
    if not stmts:
        return None
    reports = [s for s in stmts if isinstance(s, cst.Expr) and isinstance(s.value, cst.Call)
               and is_reporting_call(ctx, s.value)]
    if not reports or any(not is_pass(s) and s not in reports for s in stmts):
        return None
    if not facts.is_pure(drop_item(node.test)):
        raise Declined("the condition of the reporting `if` has calls mend cannot prove side-effect free")
    test, more = guard_test(ctx)
    torch, _ = ctx.torch_name()
    lower = Lower(facts, torch)
    compiled = [parse_stmt(_truth_check(facts, node.test, lower))]
    helpers = ["_mend_truth"]
    what = "under compile nothing is reported"
    if ctx.options.side_effects == "keep":
        prefix, rest = split_static_prefix(node.test, facts)
        cond = lower(rest[0]) if len(rest) == 1 else lower(parse_expr(and_text(rest)))
        for report in reports:
            emit = emit_arguments(ctx, node, report.value, when=cond)
            if isinstance(emit, str):
                raise Declined(f"the message cannot be kept under compile: {emit}")
            line = f"_mend_emit({', '.join(emit)})"
            compiled.append(parse_stmt(f"if {and_text(prefix)}: {line}\n" if prefix else line + "\n"))
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


def _truth_check(facts: FunctionFacts, test: cst.BaseExpression, lower: Lower) -> str:
    """The statement the compiled side of a reporting ``if`` runs so that it raises where the original
    does: ``_mend_truth(<first tensor operand>)`` (errors computing it, and the truth of a tensor of many
    elements), behind the static prefix of an ``and`` chain. Python computes later ``and``/``or``
    operands only for some values, so they must be unable to fail (one element, total, no ``mean()``,
    which rejects integers); ``.item()``/``float()`` must read one element (their own error is not the
    lowered form's)."""
    prefix, rest = split_static_prefix(test, facts)
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
        raise Declined(no_tensor_part(test, facts))
    for op in ops[1:]:
        if not (facts.is_total(drop_item(op)) and _one_element(facts, op)
                and not any(isinstance(n, cst.Name) and n.value in {"mean", "nanmean"} for n in walk(op))):
            raise Declined(f"`{code(op)}` can raise, and Python computes it only for some values of the "
                            "operands before it: only the original `if` asks for it exactly there")
    for n in walk(ops[0]):
        receiver = _number_receiver(n)
        if receiver is not None and not _one_element(facts, receiver):
            raise Declined(f"`{code(n)}` fails on a tensor of many elements with its own error")
        if isinstance(n, cst.Subscript) and not static_index(facts, n):
            raise Declined("the condition indexes by tensor values, whose errors an unused result "
                            "may not raise under compile")
    check = f"_mend_truth({lower(ops[0])})"
    return f"if {and_text(prefix)}: {check}\n" if prefix else check + "\n"


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
