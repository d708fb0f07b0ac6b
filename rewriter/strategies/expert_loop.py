"""MND304 mixture-of-experts routing loops with static shapes under compile (on the routing ``torch.where``).

The routing loop of transformers' sparse MoE blocks (Mixtral, Qwen2/3-MoE, OLMoE, PhiMoE, Jamba, DBRX...)::

    expert_hit = (expert_mask.sum(dim=(-1, -2)) > 0).nonzero(as_tuple=True)[0].tolist()   # optional
    for expert_idx in expert_hit:                      # or range(self.num_experts)
        idx, top_x = torch.where(expert_mask[expert_idx])          # data-dependent shape: a break
        current = hidden_states[None, top_x].reshape(-1, hidden_dim)
        out = self.experts[expert_idx](current) * routing_weights[top_x, idx, None]
        final.index_add_(0, top_x, out)

Under compile it becomes a loop over every expert and every (slot, token) pair of the mask, in the order
``torch.where`` lists the routed ones, with the pairs not routed to the expert masked out of the sum by
``torch.where`` (not by a multiplication, so an infinite or NaN output on a token the expert does not
serve cannot leak in). Eager runs the original loop (``if not torch.compiler.is_compiling():``)::

    else:
        for expert_idx in range(expert_mask.shape[0]):
            _mend_routed1 = expert_mask[expert_idx] != 0
            idx = torch.arange(_mend_routed1.shape[0], device=...).repeat_interleave(_mend_routed1.shape[1])
            top_x = torch.arange(_mend_routed1.shape[1], device=...).repeat(_mend_routed1.shape[0])
            _mend_routed1 = _mend_routed1.reshape(-1)
            ...                                            # the body, unchanged
            _mend_out2 = out
            final.index_add_(0, top_x, torch.where(_mend_routed1.reshape(...), _mend_out2, 0))

Every routed pair's row is computed from the same inputs with the same weight and added to the same
row, experts in the same order; what changes is that each expert runs on all K*T pairs instead of its
routed ones (a matmul over more rows may round differently, and a row that was ``-0.0`` can become
``+0.0``), and the expert FLOPs grow by the number of experts (E*K*T rows instead of K*T). Hence
**unsafe**: equal to eager within float tolerance, not bitwise. It assumes each expert treats rows
independently (an MLP; a module that mixes rows, or dropout in training, sees different rows).

Declined with a reason when the loop does not have this shape: the indices used other than as read
indices, as the ``index_add_`` index or in an emptiness test (``if top_x.shape[0] == 0: continue``);
written through (``out[top_x] = ...``); read after the loop; no single ``index_add_(0, top_x, ...)``;
``break``/``return`` in the body; an iterable other than ``range(...)`` or the list of hit experts
computed by ``.nonzero(...).tolist()`` right before the loop.
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import code, eager_else, parse_expr, parse_stmt, walk
from mend.rewriter.context import FileContext
from mend.rewriter.parts.sites import any_call
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND304",
        before="""
            import torch
            from torch import nn


            class SparseMoE(nn.Module):
                def __init__(self, dim=4, num_experts=2):
                    super().__init__()
                    self.num_experts = num_experts
                    self.gate = nn.Linear(dim, num_experts, bias=False)
                    self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(num_experts))

                def forward(self, hidden_states):
                    weights, selected = torch.topk(torch.softmax(self.gate(hidden_states), dim=-1), 1, dim=-1)
                    final = torch.zeros_like(hidden_states)
                    expert_mask = nn.functional.one_hot(selected, num_classes=self.num_experts).permute(2, 1, 0)
                    for expert_idx in range(self.num_experts):
                        idx, top_x = torch.where(expert_mask[expert_idx])
                        out = self.experts[expert_idx](hidden_states[top_x])
                        final.index_add_(0, top_x, out * weights[top_x, idx, None])
                    return final
        """,
        after="""
            import torch
            from torch import nn


            class SparseMoE(nn.Module):
                def __init__(self, dim=4, num_experts=2):
                    super().__init__()
                    self.num_experts = num_experts
                    self.gate = nn.Linear(dim, num_experts, bias=False)
                    self.experts = nn.ModuleList(nn.Linear(dim, dim) for _ in range(num_experts))

                def forward(self, hidden_states):
                    weights, selected = torch.topk(torch.softmax(self.gate(hidden_states), dim=-1), 1, dim=-1)
                    final = torch.zeros_like(hidden_states)
                    expert_mask = nn.functional.one_hot(selected, num_classes=self.num_experts).permute(2, 1, 0)
                    if not torch.compiler.is_compiling():
                        for expert_idx in range(self.num_experts):
                            idx, top_x = torch.where(expert_mask[expert_idx])
                            out = self.experts[expert_idx](hidden_states[top_x])
                            final.index_add_(0, top_x, out * weights[top_x, idx, None])
                    else:
                        for expert_idx in range(self.num_experts):
                            _mend_routed0 = expert_mask[expert_idx] != 0
                            idx = torch.arange(_mend_routed0.shape[0], device=_mend_routed0.device).repeat_interleave(_mend_routed0.shape[1])
                            top_x = torch.arange(_mend_routed0.shape[1], device=_mend_routed0.device).repeat(_mend_routed0.shape[0])
                            _mend_routed0 = _mend_routed0.reshape(-1)
                            out = self.experts[expert_idx](hidden_states[top_x])
                            _mend_out1 = out * weights[top_x, idx, None]
                            final.index_add_(0, top_x, torch.where(_mend_routed0.reshape((-1,) + (1,) * (_mend_out1.dim() - 1)), _mend_out1, 0))
                    return final
        """,
        run="compile(SparseMoE())(torch.ones(3, 4))",
        unsafe=True,
    ),
)


_WHY = ("a MoE routing loop: under compile every expert runs on every (slot, token) pair and the pairs not "
        "routed to it are masked out of the sum")


class _NotMoE(Exception):
    """The site is a MoE routing loop, but one this repair cannot prove (the message says why)."""


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    call = any_call(ctx, diag)
    return call if isinstance(call, Decline) else expert_loop_plan(ctx, diag, call)


def expert_loop_plan(ctx: FileContext, diag: Diagnostic, call: cst.Call) -> Plan | Decline | None:
    """The repair of the routing loop around ``call`` (its ``torch.where`` or the hit list's ``nonzero``),
    a decline when the loop has the routing shape but cannot be proven, or None when it is no routing loop."""
    loop = _routing_loop(ctx, call)
    if loop is None:
        return None
    try:
        return _plan(ctx, diag, loop)
    except _NotMoE as exc:
        return Decline(diag, f"MoE routing loop not rewritten: {exc}")


# --- finding the loop ---------------------------------------------------------------------------------


def _is_where1(ctx: FileContext, node: cst.CSTNode) -> bool:
    return (isinstance(node, cst.Call) and ctx.imports.qualify(node.func) == "torch.where" and len(node.args) == 1
            and node.args[0].keyword is None and isinstance(node.args[0].value, cst.Subscript))


def _where_assign(ctx: FileContext, loop: cst.For) -> cst.SimpleStatementLine | None:
    """The body statement ``a, b = torch.where(mask[expert])`` of ``loop``."""
    if not isinstance(loop.target, cst.Name) or not isinstance(loop.body, cst.IndentedBlock):
        return None
    for stmt in loop.body.body:
        if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
            assign = stmt.body[0]
            if _is_where1(ctx, assign.value):
                sub = assign.value.args[0].value
                if len(sub.slice) == 1 and isinstance(sub.slice[0].slice, cst.Index) \
                        and code(sub.slice[0].slice.value) == loop.target.value:
                    return stmt
    return None


def _routing_loop(ctx: FileContext, call: cst.Call) -> cst.For | None:
    for anc in ctx.ancestors(call):
        if isinstance(anc, cst.SimpleStatementLine):
            stmt = anc
            break
    else:
        return None
    parent = ctx.parent(ctx.parent(stmt))  # statement -> IndentedBlock -> For
    if isinstance(parent, cst.For) and _where_assign(ctx, parent) is stmt:
        return parent
    nxt = _next_statement(ctx, stmt)  # the hit list assigned right before the loop
    if isinstance(nxt, cst.For) and _hit_list(ctx, stmt, nxt) and _where_assign(ctx, nxt) is not None:
        return nxt
    return None


def _siblings(ctx: FileContext, stmt: cst.CSTNode) -> list[cst.CSTNode]:
    block = ctx.parent(stmt)
    body = getattr(block, "body", None)
    return list(body) if isinstance(body, (list, tuple)) else []


def _next_statement(ctx: FileContext, stmt: cst.CSTNode) -> cst.CSTNode | None:
    sib = _siblings(ctx, stmt)
    i = next((k for k, s in enumerate(sib) if s is stmt), None)
    return sib[i + 1] if i is not None and i + 1 < len(sib) else None


def _previous_statement(ctx: FileContext, stmt: cst.CSTNode) -> cst.CSTNode | None:
    sib = _siblings(ctx, stmt)
    i = next((k for k, s in enumerate(sib) if s is stmt), None)
    return sib[i - 1] if i else None


def _hit_list(ctx: FileContext, stmt: cst.CSTNode, loop: cst.For) -> bool:
    """``stmt`` is ``hit = <...>.nonzero(...)...tolist()`` and ``loop`` iterates over ``hit``: the experts
    with at least one routed token, in ascending order (a subset of ``range(num_experts)``)."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)
            and isinstance(loop.iter, cst.Name)):
        return False
    assign = stmt.body[0]
    value = assign.value
    if len(assign.targets) != 1 or code(assign.targets[0].target) != loop.iter.value:
        return False
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "tolist"):
        return False
    return any(isinstance(n, cst.Attribute) and n.attr.value == "nonzero" for n in walk(value))


# --- the plan ------------------------------------------------------------------------------------------


def _plan(ctx: FileContext, diag: Diagnostic, loop: cst.For) -> Plan:
    where_stmt = _where_assign(ctx, loop)
    assert where_stmt is not None
    assign = where_stmt.body[0]
    target = assign.targets[0].target
    if len(assign.targets) != 1 or not isinstance(target, cst.Tuple) or len(target.elements) != 2 \
            or not all(isinstance(e.value, cst.Name) for e in target.elements):
        raise _NotMoE("`torch.where(mask[expert])` is not unpacked into two names")
    slot, token = (e.value.value for e in target.elements)
    mask_sub = assign.value.args[0].value
    mask = mask_sub.value
    if not isinstance(mask, (cst.Name, cst.Attribute)):
        raise _NotMoE(f"the mask `{code(mask)}` is not a plain name")
    if loop.orelse is not None:
        raise _NotMoE("the loop has an `else:`")
    if any(isinstance(n, (cst.Break, cst.Return, cst.Yield)) for n in walk(loop.body)):
        raise _NotMoE("the loop body leaves the loop early (`break`/`return`/`yield`)")
    hit_stmt = _previous_statement(ctx, loop)
    if isinstance(loop.iter, cst.Call) and code(loop.iter.func) == "range":
        hit_stmt, iterable = None, loop.iter
    elif hit_stmt is not None and _hit_list(ctx, hit_stmt, loop):
        facts = ctx.facts(ctx.enclosing_function(loop))
        if len(facts.stores.get(loop.iter.value, [])) != 1 or len(facts.loads.get(loop.iter.value, [])) != 1:
            raise _NotMoE(f"the hit list `{loop.iter.value}` is used elsewhere")
        iterable = parse_expr(f"range({code(mask)}.shape[0])")
    else:
        raise _NotMoE(f"the loop iterates over `{code(loop.iter)}`, neither `range(...)` nor the hit experts "
                      "(`.nonzero(...).tolist()` right before the loop)")
    index_add = _check_uses(ctx, loop, where_stmt, {slot, token}, token)
    torch, imports = ctx.torch_name()
    routed, out = ctx.fresh("routed"), ctx.fresh("out")
    source = index_add.args[2].value
    dev = f"{routed}.device"
    head = [
        parse_stmt(f"{routed} = {code(mask_sub)} != 0\n"),
        parse_stmt(f"{slot} = {torch}.arange({routed}.shape[0], device={dev}).repeat_interleave({routed}.shape[1])\n"),
        parse_stmt(f"{token} = {torch}.arange({routed}.shape[1], device={dev}).repeat({routed}.shape[0])\n"),
        parse_stmt(f"{routed} = {routed}.reshape(-1)\n"),
    ]
    head[0] = head[0].with_changes(leading_lines=where_stmt.leading_lines)
    masked = parse_expr(f"{torch}.where({routed}.reshape((-1,) + (1,) * ({out}.dim() - 1)), {out}, 0)")
    add_stmt = _statement_of(ctx, index_add)
    new_add = index_add.with_changes(args=[*index_add.args[:2], index_add.args[2].with_changes(value=masked)])
    body: list[cst.CSTNode] = []
    for stmt in loop.body.body:
        if stmt is where_stmt:
            body.extend(head)
        elif stmt is add_stmt:
            body.append(parse_stmt(f"{out} = {code(source)}\n").with_changes(leading_lines=stmt.leading_lines))
            body.append(stmt.with_changes(body=[stmt.body[0].with_changes(value=new_add)], leading_lines=[]))
        else:
            body.append(stmt)
    compiled = loop.with_changes(iter=iterable, body=loop.body.with_changes(body=body), leading_lines=[])
    eager = [hit_stmt, loop.with_changes(leading_lines=[])] if hit_stmt else [loop]
    split = eager_else(torch, eager, [compiled])
    edits: list = [(loop, split)]
    if hit_stmt is not None:
        edits.append((hit_stmt, cst.RemoveFromParent()))
    return Plan(diag, _WHY + " (eager keeps the loop)", "unsafe", edits, imports=imports)


def _statement_of(ctx: FileContext, node: cst.CSTNode) -> cst.SimpleStatementLine:
    for anc in ctx.ancestors(node):
        if isinstance(anc, cst.SimpleStatementLine):
            return anc
    raise _NotMoE("the `index_add_` is not a statement")


def _check_uses(ctx: FileContext, loop: cst.For, where_stmt: cst.CSTNode, names: set[str], token: str) -> cst.Call:
    """Every use of the routing indices in the loop body is a read index, the index of the one
    ``final.index_add_(0, token, ...)`` statement, an emptiness test or an alias; return that call."""
    base = {n: n for n in names}  # every alias of the indices -> the index it copies
    index_adds: list[cst.Call] = []
    for stmt in loop.body.body:
        alias = _alias(stmt, base)
        if alias is not None:
            base[alias[0]] = base[alias[1]]
        elif stmt is not where_stmt:
            index_adds += [n for n in walk(stmt) if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
                           and n.func.attr.value == "index_add_"]
    if len(index_adds) != 1 or len(index_adds[0].args) != 3 or code(index_adds[0].args[0].value) != "0" \
            or base.get(code(index_adds[0].args[1].value)) != token:
        raise _NotMoE(f"the loop has no single `final.index_add_(0, {token}, ...)`")
    add = index_adds[0]
    stmt = _statement_of(ctx, add)
    if not (len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr) and stmt.body[0].value is add
            and ctx.parent(stmt) is loop.body):
        raise _NotMoE("the `index_add_` is not a statement of its own in the loop body")
    for stmt in loop.body.body:
        if stmt is where_stmt or _alias(stmt, base) is not None:
            continue
        for node in walk(stmt):
            if isinstance(node, cst.Name) and node.value in base and not _allowed_use(ctx, node, add):
                raise _NotMoE(f"`{node.value}` is used other than as a read index or the `index_add_` index "
                              f"(`{code(ctx.parent(node) or node)}`)")
    facts = ctx.facts(ctx.enclosing_function(loop))
    end = ctx.positions[loop].end.line
    for name in base:
        if any(u in ctx.positions and ctx.positions[u].start.line > end for u in facts.loads.get(name, [])):
            raise _NotMoE(f"`{name}` is read after the loop")
    return add


def _alias(stmt: cst.CSTNode, base: dict[str, str]) -> tuple[str, str] | None:
    """``new = old`` for an index name ``old``: (new, old)."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign):
        a = stmt.body[0]
        if len(a.targets) == 1 and isinstance(a.targets[0].target, cst.Name) and isinstance(a.value, cst.Name) \
                and a.value.value in base:
            return a.targets[0].target.value, a.value.value
    return None


def _allowed_use(ctx: FileContext, name: cst.Name, add: cst.Call) -> bool:
    parent = ctx.parent(name)
    if isinstance(parent, cst.Index):  # x[..., idx, ...] read
        sub = ctx.parent(ctx.parent(parent))
        return isinstance(sub, cst.Subscript) and not _is_written(ctx, sub)
    if isinstance(parent, cst.Arg) and ctx.parent(parent) is add:
        return add.args[1] is parent
    if isinstance(parent, cst.Attribute) and parent.attr.value == "shape":
        return _emptiness_test(ctx, parent)
    return False


def _is_written(ctx: FileContext, sub: cst.Subscript) -> bool:
    parent = ctx.parent(sub)
    return isinstance(parent, (cst.AssignTarget, cst.AugAssign)) and getattr(parent, "target", None) is sub


def _emptiness_test(ctx: FileContext, shape: cst.Attribute) -> bool:
    """``if idx.shape[0] == 0: continue``: with all K*T pairs the test is false unless there are no
    tokens at all, and an expert without routed tokens adds only masked zeros."""
    sub = ctx.parent(shape)
    cmp = ctx.parent(sub)
    test_if = ctx.parent(cmp)
    return (isinstance(sub, cst.Subscript) and code(sub.slice[0]) == "0" and isinstance(cmp, cst.Comparison)
            and len(cmp.comparisons) == 1 and isinstance(cmp.comparisons[0].operator, cst.Equal)
            and code(cmp.comparisons[0].comparator) == "0" and isinstance(test_if, cst.If) and test_if.test is cmp
            and test_if.orelse is None
            and all(isinstance(s, cst.Continue) for line in test_if.body.body
                    for s in getattr(line, "body", [line])))
