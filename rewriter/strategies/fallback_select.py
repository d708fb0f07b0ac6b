"""MND201: a data-dependent fallback that returns early: under compile both results are computed and one selected.

transformers falls back to another implementation when a tensor test says the fast one cannot take the
input, and returns its result at once (musicgen's SDPA attention, when a row of the mask is fully masked)::

    def forward(self, hidden_states, ..., attention_mask=None, ...):
        if attention_mask is not None and (attention_mask.mean(dim=[1, 2, 3]) <= torch.finfo(...).min).any():
            logger.warning_once("... Falling back to the manual attention implementation ...")
            return super().forward(hidden_states, ..., attention_mask=attention_mask, ...)
        ...                                   # the fast path
        return attn_output, None, past_key_value

The test reads the mask's data, so Dynamo breaks the graph there, on every call of every layer. Under
compile, with gradients off, the test's tensor part and the fallback's result are computed where the
``if`` stood, the fast path runs as written, and its return selects::

    _mend_taken1 = None
    if not torch.compiler.is_compiling() or torch.is_grad_enabled():
        if attention_mask is not None and (...).any():      # the original, unchanged
            ...
    elif attention_mask is not None:                         # the test's static prefix
        _mend_taken1 = (attention_mask.mean(dim=[1, 2, 3]) <= torch.finfo(...).min).any()
        _mend_fallback1 = super().forward(hidden_states, ...)
    ...
    if _mend_taken1 is not None:
        return _mend_where(_mend_taken1, _mend_fallback1, (attn_output, None, past_key_value))
    return attn_output, None, past_key_value

``_mend_where`` selects tensor by tensor with ``torch.where`` (tuples and lists element by element, None on
both sides as it is), so the result is the one eager returns, bit for bit, whichever side the test
picks: no assumption that the two implementations agree.

Unsafe: under compile both implementations run (the fallback's FLOPs on every call); the branch's reports
(the warning) are not made there; an error the fast path raises where eager took the fallback surfaces;
both must leave state the other reads alone (they compute from the same inputs). With gradients on the
original branch runs (a gradient through the side not selected can be NaN, and NaN times the zero
``torch.where`` gives it is NaN). Matched only for an ``if`` without ``else`` at the top of a function
body whose statements before its ``return`` only report, in a function whose one ``return`` is its last
statement.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import is_compiling_call
from mend.rewriter.analysis import code, eager_else, parse_stmt, strip_parens, walk
from mend.rewriter.context import FileContext
from mend.rewriter.parts.branches import IfSite, if_site
from mend.rewriter.parts.lower import Declined, and_text, lowered_tail, with_helpers
from mend.rewriter.parts.reporting import is_reporting_call
from mend.rewriter.plan import Decline, Example, Plan
from mend.rewriter.traversal import children

EXAMPLES = (
    Example(
        rule="MND201",
        before="""
            import torch
            from torch import nn


            class Attention(nn.Module):
                def slow(self, q, k, mask):
                    return (q @ k.T + mask).softmax(-1) @ k

                def forward(self, q, k, mask):
                    if (mask.amax(-1) < -1e9).any():
                        # a row with every key masked: the slow path
                        return self.slow(q, k, mask)
                    out = torch.nn.functional.scaled_dot_product_attention(q[None], k[None], k[None], attn_mask=mask)[0]
                    return out
        """,
        after="""
            import torch
            from torch import nn
            from _mend import where as _mend_where


            class Attention(nn.Module):
                def slow(self, q, k, mask):
                    return (q @ k.T + mask).softmax(-1) @ k

                def forward(self, q, k, mask):
                    _mend_taken0 = None
                    if not torch.compiler.is_compiling() or torch.is_grad_enabled():
                        if (mask.amax(-1) < -1e9).any():
                            # a row with every key masked: the slow path
                            return self.slow(q, k, mask)
                    else:
                        _mend_taken0 = (mask.amax(-1) < -1e9).any()
                        _mend_fallback0 = self.slow(q, k, mask)
                    out = torch.nn.functional.scaled_dot_product_attention(q[None], k[None], k[None], attn_mask=mask)[0]
                    if _mend_taken0 is not None:
                        return _mend_where(_mend_taken0, _mend_fallback0, out)
                    return out
        """,
        run="torch.no_grad()(lambda: compile(Attention())(torch.ones(2, 4), torch.ones(2, 4), torch.zeros(2, 2)))()",
        unsafe=True,
    ),
)


@dataclass
class Fallback:
    """An early-return fallback: the ``if``, its returned value, and the function's final ``return``."""

    node: cst.If
    value: cst.BaseExpression
    final: cst.SimpleStatementLine


def match(ctx: FileContext, node: cst.If, is_report) -> Fallback | str | None:
    """The fallback ``node`` starts, a reason it cannot be repaired, or None when it is not of this shape.
    ``is_report(call)``: the call only reports (print, logging, warnings, mend's emit)."""
    func = ctx.enclosing_function(node)
    block = ctx.parent(node)
    if node.orelse is not None or func is None or block is not func.body:
        return None
    body = list(node.body.body) if isinstance(node.body, cst.IndentedBlock) else []
    last = body[-1] if body else None
    if not (isinstance(last, cst.SimpleStatementLine) and len(last.body) == 1
            and isinstance(last.body[0], cst.Return) and last.body[0].value is not None):
        return None
    if not all(_reports_only(s, is_report) for s in body[:-1]):
        return None
    statements = list(block.body)
    rest = statements[statements.index(node) + 1:]
    final = rest[-1] if rest else None
    if not (isinstance(final, cst.SimpleStatementLine) and len(final.body) == 1
            and isinstance(final.body[0], cst.Return) and final.body[0].value is not None):
        return "the function does not end with a `return` of a value, where the fallback's result is selected"
    if any(_exits(s) for s in rest[:-1]):
        return "the code after the fallback returns or yields before its last statement"
    return Fallback(node, last.body[0].value, final)


def _reports_only(stmt: cst.CSTNode, is_report) -> bool:
    """``stmt`` does nothing but report: every call in it reports or tests for compilation, and it binds,
    returns and raises nothing."""
    for n in walk(stmt):
        if isinstance(n, (cst.Assign, cst.AugAssign, cst.AnnAssign, cst.NamedExpr, cst.Return, cst.Raise,
                          cst.Del, cst.Global, cst.Nonlocal, cst.Yield, cst.Await, cst.FunctionDef)):
            return False
        if isinstance(n, cst.Call) and not is_report(n):
            return False
    return True


def _exits(stmt: cst.CSTNode) -> bool:
    """A ``return`` or ``yield`` of the function itself (not of a nested function or lambda) in ``stmt``."""
    stack = [stmt]
    while stack:
        n = stack.pop()
        if isinstance(n, (cst.Return, cst.Yield)):
            return True
        if not isinstance(n, (cst.FunctionDef, cst.Lambda, cst.ClassDef)):
            stack.extend(children(n))
    return False


def rewrite(ctx: FileContext, fb: Fallback, prefix: str, tail: str, torch: str) -> list:
    """The edits: the ``if`` split by compilation (the original kept for eager and autograd; ``prefix``, the
    test's static part, still decides under compile), the final ``return`` selecting between the fallback's
    result and its own."""
    value = ctx.fresh("fallback")
    taken = value.replace("_mend_fallback", "_mend_taken")
    compiled = [parse_stmt(f"{taken} = {tail}\n"), parse_stmt(f"{value} = {code(strip_parens(fb.value))}\n")]
    split = eager_else(torch, [fb.node], compiled, grad_gate=True, prefix=prefix).with_changes(leading_lines=[])
    init = parse_stmt(f"{taken} = None\n").with_changes(leading_lines=fb.node.leading_lines)
    own = fb.final.body[0].value
    own_text = code(own) if own.lpar or not isinstance(own, cst.Tuple) else f"({code(own)})"
    select = parse_stmt(f"if {taken} is not None:\n    return _mend_where({taken}, {value}, {own_text})\n")
    select = select.with_changes(leading_lines=fb.final.leading_lines)
    return [(fb.node, cst.FlattenSentinel([init, split])),
            (fb.final, cst.FlattenSentinel([select, fb.final.with_changes(leading_lines=[])]))]


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    site = if_site(ctx, diag)
    if not isinstance(site, IfSite):
        return site
    try:
        plan = _fix_fallback(ctx, diag, site)
    except Declined as exc:
        return Decline(diag, str(exc))
    return with_helpers(plan, site.lower) if plan is not None else None


def _fix_fallback(ctx: FileContext, diag: Diagnostic, site: IfSite) -> Plan | None:
    """An early ``return`` of another implementation's result: under compile, with gradients off, both are
    computed and the final ``return`` selects (eager keeps the branch). Tried where the chain is no
    predicated form (the strategies before this one declined it)."""
    node, facts, torch = site.node, site.facts, site.torch

    def is_report(call: cst.Call) -> bool:
        qual = ctx.imports.qualify(call.func) or ""
        return is_reporting_call(ctx, call) or code(call.func) == "_mend_emit" or is_compiling_call(qual)

    found = match(ctx, node, is_report)
    if found is None:
        return None
    if isinstance(found, str):
        raise Declined(found)
    lowered = lowered_tail(node, facts, site.lower, "the fallback's test")
    if lowered is None:
        return None
    static_prefix, cond = lowered
    return Plan(diag, "a data-dependent fallback that returns early: under compile (gradients off) both "
                      "results are computed and the final `return` selects with torch.where (eager keeps the "
                      "branch)", "unsafe", rewrite(ctx, found, and_text(static_prefix), cond, torch),
                imports=site.imports, helpers=["_mend_where"])
