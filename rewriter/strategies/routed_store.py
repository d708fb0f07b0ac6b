"""MND305 a routed store: the Switch form of mixture-of-experts routing (Switch Transformers, GPTSAN)
stores each expert's rows through a boolean mask::

    for idx, expert in enumerate(self.experts.values()):
        token_indices = router_mask[:, :, idx].bool()
        next_states[token_indices] = expert(hidden_states[token_indices]).to(next_states.dtype)   # a break

Eager keeps the statement; under compile the expert runs on every row and the rows the mask selects are
stored (``_mend_routed_store(t, mask, rows)``: ``t.copy_(torch.where(mask, rows, t))``, the mask
broadcast over the trailing dimensions; an index tensor instead of a mask stores ``rows[index]``)::

        if not torch.compiler.is_compiling():
            next_states[token_indices] = expert(hidden_states[token_indices]).to(next_states.dtype)
        else:
            _mend_routed_store(next_states, token_indices, expert(hidden_states).to(next_states.dtype))

Each stored row is computed from the same input row with the same weights, and the rows not selected keep
their values (``torch.where``: an infinite or NaN output on them cannot leak in). **Unsafe** for the same
reasons as the loop above: within float tolerance (a matmul over more rows may round differently), the
expert FLOPs grow to every row per expert, and the expert must treat rows independently. Declined when
the callee is a function (``torch.*``, builtins) rather than a module, or the mask, input or stored tensor
are not side-effect free.
"""

from __future__ import annotations

import builtins

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import code, eager_else, parse_stmt
from mend.rewriter.context import FileContext
from mend.rewriter.parts.sites import mask_index
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND305",
        before='''
            import torch
            from torch import nn


            class SparseMLP(nn.Module):
                """Switch-style routing: each token goes to its router's top expert."""

                def __init__(self, dim=4, experts=2):
                    super().__init__()
                    self.router = nn.Linear(dim, experts)
                    self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(experts))

                def forward(self, hidden_states):
                    router_mask = nn.functional.one_hot(self.router(hidden_states).argmax(-1), len(self.experts))
                    next_states = hidden_states.clone()
                    for idx, expert in enumerate(self.experts):
                        token_indices = router_mask[:, idx].bool()
                        next_states[token_indices] = expert(hidden_states[token_indices])
                    return next_states
        ''',
        after='''
            import torch
            from torch import nn
            from _mend import routed_store as _mend_routed_store


            class SparseMLP(nn.Module):
                """Switch-style routing: each token goes to its router's top expert."""

                def __init__(self, dim=4, experts=2):
                    super().__init__()
                    self.router = nn.Linear(dim, experts)
                    self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(experts))

                def forward(self, hidden_states):
                    router_mask = nn.functional.one_hot(self.router(hidden_states).argmax(-1), len(self.experts))
                    next_states = hidden_states.clone()
                    for idx, expert in enumerate(self.experts):
                        token_indices = router_mask[:, idx].bool()
                        if not torch.compiler.is_compiling():
                            next_states[token_indices] = expert(hidden_states[token_indices])
                        else:
                            _mend_routed_store(next_states, token_indices, expert(hidden_states))
                    return next_states
        ''',
        run="compile(SparseMLP())(torch.ones(3, 4))",
        unsafe=True,
    ),
)


_WHY_STORE = ("a routed store `t[mask] = f(x[mask])`: under compile `f` runs on every row and the rows the mask "
              "selects are stored with `torch.where` (eager keeps the statement)")


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    sub = mask_index(ctx, diag)
    return sub if isinstance(sub, Decline) else routed_store_plan(ctx, diag, sub)


def routed_store_plan(ctx: FileContext, diag: Diagnostic, sub: cst.Subscript) -> Plan | Decline | None:
    """The repair of ``T[M] = F(X[M])`` (``.to(...)`` after the call allowed) around the read ``sub`` (``X[M]``),
    a decline when the store has that shape but ``F`` is not a module applied row by row, or None."""
    stmt = ctx.statement_line(sub)
    store = _routed_store(stmt, sub)
    if store is None:
        return None
    target, value = store
    callee = value.func
    qual = ctx.imports.qualify(callee) or ""
    if qual.startswith(("torch.", "builtins.", "math.", "numpy.")) or (
            isinstance(callee, cst.Name) and callee.value in dir(builtins)):
        return Decline(diag, f"`{code(callee)}` is a function, not a module applied row by row (an expert)")
    mask = target.slice[0].slice.value
    facts = ctx.facts(ctx.enclosing_function(stmt))
    if not all(facts.is_pure(e) for e in (mask, sub.value, target.value)):
        return Decline(diag, "the mask, the input or the stored tensor has calls mend cannot prove side-effect free")
    torch, imports = ctx.torch_name()
    rows = stmt.body[0].value.deep_replace(sub, sub.value)
    compiled = parse_stmt(f"_mend_routed_store({code(target.value)}, {code(mask)}, {code(rows)})\n")
    split = eager_else(torch, [stmt], [compiled])
    return Plan(diag, _WHY_STORE, "unsafe", [(stmt, split)], imports=imports, helpers=["_mend_routed_store"])


def _routed_store(stmt: cst.SimpleStatementLine | None, sub: cst.Subscript) -> tuple[cst.Subscript, cst.Call] | None:
    """(``T[M]``, ``F(X[M])``) when ``stmt`` is ``T[M] = F(X[M])`` or ``T[M] = F(X[M]).to(...)...`` and ``sub`` is
    the ``X[M]``; else None."""
    if stmt is None or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Assign):
        return None
    assign = stmt.body[0]
    target = assign.targets[0].target if len(assign.targets) == 1 else None
    if not (isinstance(target, cst.Subscript) and len(target.slice) == 1 and isinstance(target.slice[0].slice, cst.Index)
            and len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Index)
            and code(target.slice[0].slice.value) == code(sub.slice[0].slice.value)):
        return None
    value = assign.value
    while isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "to":
        value = value.func.value
    if not (isinstance(value, cst.Call) and len(value.args) == 1 and value.args[0].value is sub
            and value.args[0].keyword is None and not value.args[0].star):
        return None
    return target, value
