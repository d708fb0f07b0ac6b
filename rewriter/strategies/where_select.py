"""MND201 ``if``/``elif``/``else`` chains of assignments or returns: ``torch.where`` under compile.

Eager always keeps the original chain: the repair is ``if not torch.compiler.is_compiling(): <the original
if> else: <the predicated form>``. Accepted shapes, over a whole ``if``/``elif``/``else`` chain:

* every branch body is simple statements: assignments of side-effect-free expressions to plain
  names, ``pass``, or (in every branch) a final ``return <expr>``;
* the conditions lower to bool tensors (:class:`~mend.rewriter.parts.lower.Lower`); a leading *static*
  prefix of an ``and`` chain (``h.dtype == torch.float16 and ...``) stays a Python test around the
  predicated form;
* no side can change shape (``torch.cat``, reshapes, indexing): torch.where cannot select between
  sides of different shapes; except a broadcast update ``h = h * mask[:, None]`` (only the other
  operand reshaped), which has ``h``'s shape or makes ``_mend_where`` fall back (unsafe);
* a name a branch assigns is defined before the chain, or assigned in every branch of a complete
  chain, or a temporary of its branch (neither defined before nor read after).
* no selected name is updated in place after the chain (``x.add_(1)``, ``x[m] = v``, ``x[m] += v``, also
  through a view or another name sharing its storage): the selection is a new tensor even where the original
  kept the old one, which such an update would no longer reach.

Under compile, conditions are computed first, then each assignment becomes
``x = _mend_where(cond_k, new, x)`` in order, exact for mutually exclusive one-element conditions.
``_mend_where`` is ``torch.where`` when the sides agree in shape, dtype and device, decided while tracing,
and the original selection otherwise. A name whose values are dtype or device reads (``dtype = h.dtype``)
becomes ``_mend_same(cond, new, old)``: ``old`` when ``new`` is the same object, else the original
selection. The side not taken is computed too: the fix is *safe* when every such expression cannot raise
(``FunctionFacts.is_total``), else *unsafe*. When a value's gradient could be infinite on the unselected
side, the original branch also runs when grad is enabled (GraphMend's gate). A chain mend cannot read is
declined with its reason, and the strategies after this one may still repair it.
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import FLOAT_DTYPES
from mend.rewriter.analysis import FunctionFacts, code, eager_else, names_in, parse_stmt, strip_parens, walk
from mend.rewriter.context import FileContext
from mend.rewriter.parts.branches import (
    Chain,
    IfSite,
    assigns,
    defined_before,
    if_site,
    names_read_after,
    read_chain,
    updated_in_place_after,
)
from mend.rewriter.parts.lower import Declined, Lower, and_text, is_pass, speculated_tests, with_helpers
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND201",
        before="""
            import torch
            from torch import nn


            class M(nn.Module):
                def forward(self, x: torch.Tensor):
                    y = x * 2
                    if x.max() > 2:
                        y = x.clamp(max=2.0) * 2
                    return y + 1
        """,
        after="""
            import torch
            from torch import nn
            from _mend import where as _mend_where


            class M(nn.Module):
                def forward(self, x: torch.Tensor):
                    y = x * 2
                    if not torch.compiler.is_compiling():
                        if x.max() > 2:
                            y = x.clamp(max=2.0) * 2
                    else:
                        y = _mend_where(x.max() > 2, x.clamp(max=2.0) * 2, y)
                    return y + 1
        """,
        run="compile(M())(torch.arange(4.0))",
    ),
)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    site = if_site(ctx, diag)
    if not isinstance(site, IfSite):
        return site
    try:
        chain = read_chain(ctx, site.node, site.facts)
    except Declined as exc:
        return Decline(diag, str(exc), final=False)
    if chain.needs_cond:
        return None
    try:
        plan = _where_plan(ctx, diag, chain, site.facts, site.lower, site.torch, site.imports)
    except Declined as exc:
        return Decline(diag, str(exc))
    return with_helpers(plan, site.lower)


def _where_plan(ctx: FileContext, diag: Diagnostic, chain: Chain, facts: FunctionFacts, lower: Lower,
                torch: str, imports: list) -> Plan:
    """Eager keeps the chain; under compile each value is selected with ``_mend_where``.

    ``_mend_where`` (a helper function) is ``torch.where`` when the two sides agree in shape,
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
        raise Declined(f"the sides can differ in shape (`{op}` in `{code(value)}`): torch.where cannot "
                        "select between them, and computing the side not taken can fail")
    conds = [lower(t) for t in chain.tests]
    if chain.returns:
        compiled = _where_returns(chain, facts, conds, torch)
    else:
        compiled = _where_assignments(ctx, chain, facts, conds, torch)
    floating = _floating_names(chain.static_prefix)
    speculated = chain.values() + [t for test in chain.tests for t in speculated_tests(test)][1:]
    safe = not broadcast and all(facts.is_total(e, floating) for e in speculated)
    grad_gate = not all(facts.is_grad_safe(v) for v in chain.values())
    split = eager_else(torch, [chain.node], [parse_stmt(t + "\n") for t in compiled], grad_gate=grad_gate,
                       prefix=and_text(chain.static_prefix))
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


def _where_returns(chain: Chain, facts: FunctionFacts, conds: list[str], torch: str) -> list[str]:
    """``return _mend_where(c1, r1, _mend_where(c2, r2, r3))``, after each branch's temporaries."""
    values = [b[-1].value for b in chain.bodies]
    if chain.follow_return is not None:
        values.append(chain.follow_return.value)
    if not any(facts.is_tensor(v) for v in values):
        raise Declined("cannot prove any returned value is a tensor")
    out: list[str] = []
    seen: set[str] = set()
    for k, body in enumerate(chain.bodies):
        others = set().union(*(names_in(s) for j, b in enumerate(chain.bodies) if j != k for s in b))
        for s in chain.assignments(body):
            name = s.targets[0].target.value
            if name in seen or name in others or name in facts.params or _stored_elsewhere(facts, name, chain):
                raise Declined(f"`{name}` is assigned before a return and read or assigned elsewhere; "
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


def _stored_elsewhere(facts: FunctionFacts, name: str, chain: Chain) -> bool:
    """``name`` is stored outside the chain (so it is not a temporary of one branch)."""
    inside = {id(n) for n in walk(chain.node)}
    return any(id(s) not in inside for s in facts.stores.get(name, []))


def _where_assignments(ctx: FileContext, chain: Chain, facts: FunctionFacts, conds: list[str],
                       torch: str) -> list[str]:
    """Each assignment becomes ``x = _mend_where(cond_k, value, x)``, conditions computed first.

    A name defined before the chain keeps its old value on the other side. A name first defined in
    the chain and read after it must be assigned in every branch of a complete chain; its first
    assignment is plain (some branch always overwrites what it does not select). A name neither
    defined before nor read after is a temporary of its branch: assigned plainly where it was.
    """
    live = names_read_after(ctx, chain.node, facts)
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
            elif defined_before(ctx, facts, name, chain.node):
                if _static_assigned(chain, name):
                    out.append(f"{name} = _mend_same({k}, {value}, {name})")
                elif not _tensor_assigned(chain, facts, name):
                    raise Declined(f"cannot prove `{name}` holds a tensor (a dtype or device read, "
                                    "`x.dtype`, is the only other value selected)")
                else:
                    out.append(f"{name} = _mend_where({k}, {value}, {name})")
            elif name in live:
                if not (chain.has_else and all(assigns(b, name) for b in chain.bodies)):
                    raise Declined(f"`{name}` is not defined before the `if` and not assigned in every "
                                    "branch, so it has no value on the other side of torch.where")
                if not _tensor_assigned(chain, facts, name):
                    raise Declined(f"cannot prove `{name}` holds a tensor")
                out.append(f"{name} = {value}" if name not in started else f"{name} = _mend_where({k}, {value}, {name})")
                started.add(name)
            else:
                out.append(f"{name} = {value}")
            assigned_here.add(name)
    if not any("_mend_where(" in t for t in out):
        raise Declined("the branches assign nothing that is read after the `if`")
    updated = updated_in_place_after(ctx, chain.node, {t.split(" = ", 1)[0] for t in out if " = _mend_where(" in t})
    if updated:
        raise Declined(f"`{updated}` is updated in place after the `if` and may share storage with the "
                       "selected value: under compile the selection is a new tensor where the original "
                       "kept the old one, so the update would not reach it")
    return out


def _branch_temporaries(chain: Chain, live: set[str]) -> set[str]:
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


def _exclusive_conditions(ctx: FileContext, chain: Chain, conds: list[str], torch: str,
                          out: list[str]) -> list[str]:
    """One condition per body, true for exactly the body the original runs (hoisted when needed)."""
    statements = sum(1 for b in chain.bodies for s in b if not is_pass(s))
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


def _static_assigned(chain: Chain, name: str) -> bool:
    """Every value the chain assigns to ``name`` reads a tensor's ``.dtype`` or ``.device``: a Python
    constant while Dynamo traces. ``_mend_same`` keeps the old value when the new one is the same
    object (no selection is needed: Zamba's ``dtype = hidden_states.dtype`` beside a masked update),
    and otherwise selects as the original did (a graph break, never another value)."""
    values = [s.value for b in chain.bodies for s in chain.assignments(b) if s.targets[0].target.value == name]
    return bool(values) and all(isinstance(v, cst.Attribute) and v.attr.value in _STATIC_ATTRS for v in
                                map(strip_parens, values))


def _tensor_assigned(chain: Chain, facts: FunctionFacts, name: str) -> bool:
    """Some branch assigns ``name`` a provable tensor, or it holds one everywhere (``_mend_where`` checks
    the rest while tracing; this only keeps mend from rewriting selections between Python values). A
    broadcast update ``name * mask[:, None]`` counts: its other operand is reshaped or indexed by a
    tensor operation, which Python numbers and lists do not have."""
    return name in facts.tensor_names or any(
        facts.is_tensor(s.value) or (_broadcast_update(s.value, name) and facts.shape_changing(s.value))
        for b in chain.bodies for s in chain.assignments(b) if s.targets[0].target.value == name)


def _check_reads(ctx: FileContext, chain: Chain, facts: FunctionFacts, value: cst.BaseExpression,
                 assigned_here: set[str]) -> None:
    """A value may not read a name that only the chain defines before its own branch assigns it
    (the original would raise NameError there; the rewrite would read another branch's value)."""
    in_chain = {s.targets[0].target.value for b in chain.bodies for s in chain.assignments(b)}
    for name in names_in(value) & in_chain - assigned_here:
        if not defined_before(ctx, facts, name, chain.node):
            raise Declined(f"`{name}` is read in a branch before that branch assigns it")


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
