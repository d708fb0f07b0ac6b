"""MND201: A branch that drops a mask of all ones (``mask = None``): under compile the mask is kept.

transformers skips a mask that masks nothing, as a fast path, and says so in its comments::

    # when the `patch_attention_mask` is full of 1s ... avoiding passing the attention_mask,
    # which is equivalent to attending to the full sequence       (idefics2/3, smolvlm, aria)
    if not torch.any(~patch_attention_mask):
        patch_attention_mask = None
    elif not self._use_flash_attention_2:
        patch_attention_mask = _prepare_4d_attention_mask(patch_attention_mask, hidden_states.dtype)

    mamba_mask = attention_mask             # "no need for zeroing states when attending to all inputs"
    if cache_position[0] > 0 or (attention_mask is not None and torch.all(attention_mask == 1)):
        mamba_mask = None                   # (bamba, jamba, granitemoehybrid)

The all-ones test reads the mask's data, so Dynamo breaks the graph there, once per call. Under compile
the test is taken as false, so the mask is kept and the code for any other mask runs with it::

    if not torch.compiler.is_compiling() and not torch.any(~patch_attention_mask):

Eager evaluates the original test, in the same order with the same short-circuits. The other operands of
the condition still decide under compile (``cache_position[0] > 0`` above).

Unsafe: under compile a mask of ones is applied (an attention bias of zeros, a product with ones) where
eager skips it; a kernel chosen for a masked call can round differently (within float tolerance). It
relies on the meaning the code's own test gives the mask: all ones masks nothing. Matched only where the
tested name says it is a mask, the test appears positively (not under ``not``) among ``and``/``or``
operands, and the branch's only statement sets that mask, or a copy of it made just before, to None.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import body_statements, code, parse_expr, strip_parens
from mend.rewriter.context import FileContext
from mend.rewriter.parts.branches import IfSite, if_site
from mend.rewriter.parts.lower import Declined, with_helpers
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND201",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x, mask):
                    # a mask of ones masks nothing: skip it
                    if torch.all(mask == 1):
                        mask = None
                    if mask is not None:
                        x = x * mask
                    return x + 1
        """,
        after="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x, mask):
                    # a mask of ones masks nothing: skip it
                    if not torch.compiler.is_compiling() and torch.all(mask == 1):
                        mask = None
                    if mask is not None:
                        x = x * mask
                    return x + 1
        """,
        run="compile(M())(torch.arange(4.0), torch.ones(4))",
        unsafe=True,
    ),
)


@dataclass
class MaskDrop:
    """The all-ones test to guard, and the names involved."""

    test: cst.BaseExpression
    mask: str
    target: str


def _all_true_of(expr: cst.BaseExpression, torch: str) -> str | None:
    """The mask ``m`` when ``expr`` is true exactly where every element of ``m`` is set: ``torch.all(m ==
    1)``, ``(m == 1).all()``, ``m.all()``, ``not torch.any(~m)``, ``not (m == 0).any()`` and their kin."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not):
        inner = _reduced(expr.expression, "any", torch)
        return _unset(inner) if inner is not None else None
    inner = _reduced(expr, "all", torch)
    return _set(inner) if inner is not None else None


def _reduced(expr: cst.BaseExpression, how: str, torch: str) -> cst.BaseExpression | None:
    """``x`` of ``torch.<how>(x)`` or ``x.<how>()`` (no other arguments)."""
    expr = strip_parens(expr)
    if not (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == how):
        return None
    if code(expr.func.value) == torch and len(expr.args) == 1 and expr.args[0].keyword is None \
            and not expr.args[0].star:
        return expr.args[0].value
    return None if expr.args else expr.func.value


def _set(expr: cst.BaseExpression) -> str | None:
    """``m`` for ``m``, ``m == 1``, ``m != 0``, ``m.bool()``."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        op, right = expr.comparisons[0].operator, code(expr.comparisons[0].comparator)
        if (isinstance(op, cst.Equal) and right in ("1", "1.0", "True")) or \
                (isinstance(op, cst.NotEqual) and right in ("0", "0.0", "False")):
            return _mask_name(expr.left)
        return None
    if isinstance(expr, cst.Call) and not expr.args and isinstance(expr.func, cst.Attribute) \
            and expr.func.attr.value == "bool":
        return _mask_name(expr.func.value)
    return _mask_name(expr)


def _unset(expr: cst.BaseExpression) -> str | None:
    """``m`` for ``~m``, ``m == 0``, ``m.logical_not()``: some element of ``m`` is not set."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.BitInvert):
        return _set(expr.expression)
    if isinstance(expr, cst.Comparison) and len(expr.comparisons) == 1:
        op, right = expr.comparisons[0].operator, code(expr.comparisons[0].comparator)
        if isinstance(op, cst.Equal) and right in ("0", "0.0", "False"):
            return _mask_name(expr.left)
        return None
    if isinstance(expr, cst.Call) and not expr.args and isinstance(expr.func, cst.Attribute) \
            and expr.func.attr.value == "logical_not":
        return _set(expr.func.value)
    return None


def _mask_name(expr: cst.BaseExpression) -> str | None:
    expr = strip_parens(expr)
    return expr.value if isinstance(expr, cst.Name) else None


def _positive_operands(test: cst.BaseExpression):
    """The operands of ``and``/``or`` in ``test`` (itself included) whose truth can only make it true."""
    yield test
    test = strip_parens(test)
    if isinstance(test, cst.BooleanOperation) and not _eager_only(test):
        yield from _positive_operands(test.left)
        yield from _positive_operands(test.right)


def _eager_only(test: cst.BooleanOperation) -> bool:
    """``not <...>.is_compiling() and ...``: a test this fix (or the user) already keeps out of compile."""
    left = strip_parens(test.left)
    return isinstance(test.operator, cst.And) and isinstance(left, cst.UnaryOperation) \
        and isinstance(left.operator, cst.Not) and code(left.expression).endswith("is_compiling()")


def _dropped_name(body: cst.BaseSuite) -> str | None:
    """``n`` when the branch's only statement is ``n = None``."""
    stmts = body_statements(body)
    if not stmts or len(stmts) != 1 or not isinstance(stmts[0], cst.Assign):
        return None
    assign = stmts[0]
    if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name) \
            or code(assign.value) != "None":
        return None
    return assign.targets[0].target.value


def _copied_just_before(block: list[cst.BaseStatement], node: cst.If, target: str, mask: str) -> bool:
    """The last statement before ``node`` that writes ``target`` or ``mask`` is ``target = mask``."""
    before = block[:block.index(node)] if node in block else []
    for stmt in reversed(before):
        if not isinstance(stmt, cst.SimpleStatementLine):
            return False  # a compound statement may write either name
        for s in reversed(stmt.body):
            if isinstance(s, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                targets = [t.target for t in s.targets] if isinstance(s, cst.Assign) else [s.target]
                written = {code(t) for t in targets}
                if written & {target, mask}:
                    return isinstance(s, cst.Assign) and written == {target} and code(s.value) == mask
    return False


def match(branch: cst.If, block: list[cst.BaseStatement], top: cst.If, torch: str) -> MaskDrop | str | None:
    """The all-ones test of ``branch`` (an ``if`` or ``elif`` of the chain starting at ``top``, which
    stands in ``block``) when its body drops the tested mask; a reason when it nearly does; None when
    the branch is not of this kind."""
    target = _dropped_name(branch.body)
    if target is None:
        return None
    tests = [(e, m) for e in _positive_operands(branch.test) if (m := _all_true_of(e, torch)) is not None]
    if not tests:
        return None
    if len(tests) > 1:
        return "the condition tests more than one mask for all ones"
    test, mask = tests[0]
    if "mask" not in mask.lower():
        return f"`{mask}` is not named as a mask; only a mask of all ones is known to mean no mask"
    if target != mask and not _copied_just_before(block, top, target, mask):
        return f"`{target}`, set to None, is not `{mask}` nor a copy of it made just before the `if`"
    return MaskDrop(test, mask, target)


def guarded(drop: MaskDrop, torch: str, whole: bool) -> cst.BaseExpression:
    """The test, false under compile: ``not torch.compiler.is_compiling() and <test>``, in parentheses
    unless it is the ``if``'s ``whole`` condition."""
    text = f"not {torch}.compiler.is_compiling() and {code(strip_parens(drop.test))}"
    return parse_expr(text if whole else f"({text})")


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    site = if_site(ctx, diag)
    if not isinstance(site, IfSite):
        return site
    try:
        plan = _fix_mask_drop(ctx, diag, site)
    except Declined as exc:
        return Decline(diag, str(exc))
    return with_helpers(plan, site.lower) if plan is not None else None


def _fix_mask_drop(ctx: FileContext, diag: Diagnostic, site: IfSite) -> Plan | None:
    """A branch of the chain sets a mask of all ones to None: under compile its test is false and the
    mask is kept (eager keeps the test)."""
    node, torch = site.node, site.torch
    parent = ctx.parent(node)
    block = list(getattr(parent, "body", ()))
    branch: cst.If | None = node
    while isinstance(branch, cst.If):
        drop = match(branch, block, node, torch)
        if isinstance(drop, str):
            raise Declined(drop)
        if drop is not None:
            new = guarded(drop, torch, whole=drop.test is branch.test)
            return Plan(diag, f"a mask of all ones set to None: under compile `{drop.target}` keeps the mask "
                              "(its all-ones test is false there; eager keeps the test)", "unsafe",
                        [(drop.test, new)], imports=site.imports)
        branch = branch.orelse if isinstance(branch.orelse, cst.If) else None
    return None
