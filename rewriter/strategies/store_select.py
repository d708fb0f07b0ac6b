"""MND201: A store into a tensor under a data-dependent test (MND201): selected with ``torch.where`` under compile.

smolvlm keeps at least one image when every image of the batch is padding::

    if not any(real_images_inds):
        real_images_inds[0] = True

The test reads tensor data: Dynamo breaks the graph there, once per call. Under compile the store is made
on every path, of the value the original leaves there when the test is false::

    if not torch.compiler.is_compiling() or torch.is_grad_enabled():
        <the original if>                                  # eager (and autograd): unchanged
    else:
        real_images_inds[0] = _mend_where(torch.logical_not(_mend_any(real_images_inds)),
                                          torch.full_like(real_images_inds[0], True), real_images_inds[0])

A number stored through one bool mask (a comparison with a tensor side, a bool op such as ``.eq(0)``,
``~`` of one) goes through the mask's elements where the test holds and none where it fails (fastspeech2,
``if duration_labels.sum() == 0: duration_labels[duration_labels.sum(dim=1).eq(0)] = 1``)::

    duration_labels[_mend_mask_if(duration_labels.sum() == 0, duration_labels.sum(dim=1).eq(0))] = 1

a store through a bool mask, which Dynamo traces without a data-dependent shape; where the test holds the
same elements get the same number, where it fails none is written.

Matched: an ``if`` with no ``elif``/``else`` whose body is one assignment to ``name[index]``, ``name`` a
plain name known to hold a tensor, every index a number, a slice of numbers, ``None`` or ``...`` (the element read back has a
shape known while tracing) or one bool mask with a number stored, a value without calls mend cannot prove side-effect free. A number literal
value becomes ``torch.full_like(name[index], value)``: the number cast to the tensor's dtype, as the store
casts it. ``_mend_where`` selects with ``torch.where`` only when both sides agree in shape, dtype and device
(decided while tracing), else as the original did (a graph break, never other numbers).

Why the numbers are the original's: where the test is true the same value is stored; where it is false
the element is stored back unchanged. **Unsafe**, under compile only: the value and the test are computed
on both paths, the element too (an error there, such as an index out of range, raises where the
original skipped the store), and the tensor is written, with its own numbers, where the original left it
alone (its version counter moves; with gradients on the original ``if`` runs, since a write in place
changes what autograd records). ``any(t)``/``all(t)`` of a tensor become ``_mend_any(t)``: ``torch.any``/
``torch.all`` of a 1-D tensor, Python's own for any other (as the original raises or answers).
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import BOOL_OPS, BOOL_TORCH
from mend.rewriter.analysis import FunctionFacts, body_statements, code, eager_else, is_number, parse_stmt, strip_parens
from mend.rewriter.context import FileContext
from mend.rewriter.parts.branches import IfSite, if_site
from mend.rewriter.parts.lower import Declined, and_text, lowered_tail, no_tensor_part, static_index, with_helpers
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND201",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, images):
                    real = images.sum(dim=-1) != 0
                    if not any(real):
                        # no image: keep the first one
                        real[0] = True
                    return images * real[:, None]
        """,
        after="""
            import torch
            from torch import nn
            from _mend import any_ as _mend_any, where as _mend_where


            class M(nn.Module):
                def forward(self, images):
                    real = images.sum(dim=-1) != 0
                    if not torch.compiler.is_compiling() or torch.is_grad_enabled():
                        if not any(real):
                            # no image: keep the first one
                            real[0] = True
                    else:
                        real[0] = _mend_where(torch.logical_not(_mend_any(real)), torch.full_like(real[0], True), real[0])
                    return images * real[:, None]
        """,
        run="torch.no_grad()(lambda: compile(M())(torch.zeros(3, 2)))()",
        unsafe=True,
    ),
)


_COMPARE = (cst.Equal, cst.NotEqual, cst.LessThan, cst.LessThanEqual, cst.GreaterThan, cst.GreaterThanEqual)


@dataclass
class Store:
    """``target[index] = value`` under the test of ``node``; ``mask``: the index, where it is one bool mask
    and the value a number."""

    node: cst.If
    target: cst.Subscript
    value: cst.BaseExpression
    mask: cst.BaseExpression | None = None


def match(node: cst.If, facts: FunctionFacts, static_index) -> Store | str | None:
    """The store under ``node`` (an ``if`` with one assignment to a subscript and nothing else), a reason
    it is not repaired, or None (another shape of ``if``). ``static_index(facts, subscript)`` says whether
    every index is known while tracing."""
    if node.orelse is not None:
        return None
    stmts = body_statements(node.body)
    if stmts is None or len(stmts) != 1 or not isinstance(stmts[0], cst.Assign):
        return None
    stmt = stmts[0]
    if len(stmt.targets) != 1 or not isinstance(stmt.targets[0].target, cst.Subscript):
        return None
    target = stmt.targets[0].target
    if not isinstance(target.value, cst.Name):
        return "the store's tensor is not a plain name"
    if not facts.is_tensor(target.value):
        return f"cannot prove `{target.value.value}` is a tensor (a list takes no torch.where)"
    mask = _bool_mask(facts, target)
    if mask is None and not static_index(facts, target):
        return ("the store's index is not made of numbers, slices, None or `...`, nor one bool mask with a number "
                "stored (its shape depends on data)")
    if mask is not None and not (_is_number(strip_parens(stmt.value)) or facts.is_python_number(stmt.value)):
        return f"a store through a bool mask of `{code(stmt.value)}`, not a number"
    if not facts.is_pure(stmt.value) or (mask is not None and not facts.is_pure(mask)):
        return f"`{code(stmt)}` has calls mend cannot prove side-effect free"
    return Store(node, target, stmt.value, mask)


def _bool_mask(facts: FunctionFacts, target: cst.Subscript) -> cst.BaseExpression | None:
    """The one index of ``target`` when it is a bool tensor by its form: a comparison with a tensor side, a
    bool op of torch or a tensor's (``lengths.sum(dim=1).eq(0)``), ``~`` of one; else None."""
    if len(target.slice) != 1 or not isinstance(target.slice[0].slice, cst.Index):
        return None
    index = target.slice[0].slice.value
    return index if _is_bool_tensor(facts, strip_parens(index)) else None


def _is_bool_tensor(facts: FunctionFacts, e: cst.BaseExpression) -> bool:
    if isinstance(e, cst.Comparison):
        return len(e.comparisons) == 1 and isinstance(e.comparisons[0].operator, _COMPARE) and facts.is_tensor(e)
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.BitInvert):
        return _is_bool_tensor(facts, strip_parens(e.expression))
    if isinstance(e, cst.Call):
        qual = facts.imports.qualify(e.func) or ""
        if qual in BOOL_TORCH:
            return True
        return isinstance(e.func, cst.Attribute) and e.func.attr.value in BOOL_OPS \
            and facts.is_tensor(e.func.value)
    return False


def _is_number(value: cst.BaseExpression) -> bool:
    return is_number(value) or (isinstance(value, cst.Name) and value.value in ("True", "False"))


def compiled(store: Store, cond: str, torch: str) -> str:
    """The statement run under compile: the store of the selected value."""
    if store.mask is not None:  # the same elements where the test holds, none where it fails
        return f"{code(store.target.value)}[_mend_mask_if({cond}, {code(store.mask)})] = {code(store.value)}\n"
    target = code(store.target)
    value = strip_parens(store.value)
    number = _is_number(value)
    new = f"{torch}.full_like({target}, {code(value)})" if number else code(value)
    return f"{target} = _mend_where({cond}, {new}, {target})\n"


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    site = if_site(ctx, diag)
    if not isinstance(site, IfSite):
        return site
    try:
        plan = _fix_store(ctx, diag, site)
    except Declined as exc:
        return Decline(diag, str(exc))
    return with_helpers(plan, site.lower) if plan is not None else None


def _fix_store(ctx: FileContext, diag: Diagnostic, site: IfSite) -> Plan | None:
    """One store into a tensor under the test: under compile, with gradients off, the element is stored
    on every path, the torch.where-selected value (eager keeps the branch)."""
    node, facts, torch = site.node, site.facts, site.torch
    found = match(node, facts, static_index)
    if found is None:
        return None
    if isinstance(found, str):
        raise Declined(found)
    lowered = lowered_tail(node, facts, site.lower)
    if lowered is None:
        raise Declined(no_tensor_part(node.test, facts))
    static_prefix, cond = lowered
    store = parse_stmt(compiled(found, cond, torch))
    split = eager_else(torch, [node], [store], grad_gate=True, prefix=and_text(static_prefix))
    return Plan(diag, "a data-dependent store into a tensor: under compile (gradients off) the element is stored "
                      "on every path, the torch.where-selected value (eager keeps the branch)", "unsafe",
                [(node, split)], imports=site.imports,
                helpers=["_mend_mask_if" if found.mask is not None else "_mend_where"])
