"""Grouped MoE experts fed by a ``.tolist()`` of per-expert counts (MND303 on the router's ``.tolist()``).

JetMoE and the GraniteMoE family route tokens in two modules. The router counts the rows per expert and
hands the counts on as a Python list; the experts split their input by those counts::

    class TopKGating(nn.Module):
        def forward(self, hidden_states):
            ...
            expert_size = gates.long().sum(0)
            expert_size = expert_size.tolist()                  # data-dependent: a break
            ...
            return index_sorted_experts, batch_index, batch_gates, expert_size, logits

    class ParallelExperts(nn.Module):
        def forward(self, inputs, expert_size):
            input_list = inputs.split(expert_size, dim=0)       # consecutive chunks, one per expert
            output_list = []
            for i in range(self.num_experts):
                output_list.append(F.linear(input_list[i], self.weight[i]))
            results = torch.cat(output_list, dim=0)
            return results

Under compile the router keeps the counts as a tensor (``if not torch.compiler.is_compiling():`` around
the ``.tolist()``) and the experts compute every expert on every row, then pick each row's own expert
by gathering from the stacked outputs (static shapes)::

    if not torch.compiler.is_compiling():
        <the original four statements>                         # eager: unchanged
    else:
        output_list = []
        for i in range(self.num_experts):
            output_list.append(F.linear(inputs, self.weight[i]))
        _mend_rows1 = torch.arange(inputs.shape[0], device=inputs.device)
        _mend_ends2 = torch.as_tensor(expert_size, device=inputs.device).cumsum(0)
        _mend_group3 = (_mend_rows1[:, None] >= _mend_ends2[None, :]).sum(1)
        results = torch.stack(output_list, 0)[_mend_group3, _mend_rows1]

``torch.as_tensor`` takes the counts as the tensor the repaired router now hands on, or as a list from
any other caller (constants under compile). Row ``r`` lies in chunk ``g`` of the split exactly when ``g``
chunk ends are ``<= r``, so every row gets
the output of the expert the split gave it, computed from the same row and weight; rows are picked, not
summed. **Unsafe**: equal to eager within float tolerance, not bitwise (a matmul over more rows may
round differently), and each expert runs on all rows: the experts' FLOPs and the stacked output grow by
the number of experts. It needs the per-chunk computation to treat rows independently, so only
``F.linear(input_list[i], ...)`` and ``input_list[i] @ w`` are accepted.

Declined, with the reason, when the counts reach code this repair does not rewrite: a use of the
router's count output (followed by name through tuples in the file) other than as the count argument of
a rewritten experts module or an element carried in a tuple; when no experts module of this shape
consumes them; when the split, the list or the loop are used otherwise.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import code, eager_else, parse_stmt, self_attr, walk
from mend.rewriter.context import FileContext
from mend.rewriter.parts.experts import assign_to_name, concatenated, empty_list, single_statement
from mend.rewriter.parts.sites import tolist_call
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND303",
        before="""
            import torch
            import torch.nn.functional as F
            from torch import nn


            class ParallelExperts(nn.Module):
                def __init__(self, num_experts, size):
                    super().__init__()
                    self.weight = nn.Parameter(torch.randn(num_experts, size, size))
                    self.num_experts = num_experts

                def forward(self, inputs, expert_size):
                    input_list = inputs.split(expert_size, dim=0)
                    output_list = []
                    for i in range(self.num_experts):
                        output_list.append(F.linear(input_list[i], self.weight[i]))
                    results = torch.cat(output_list, dim=0)
                    return results


            class Router(nn.Module):
                def forward(self, expert_ids):
                    index = expert_ids.argsort()
                    expert_size = nn.functional.one_hot(expert_ids, 2).sum(0)
                    expert_size = expert_size.tolist()
                    return index, expert_size


            class MoE(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.router = Router()
                    self.experts = ParallelExperts(2, 4)

                def forward(self, x, expert_ids):
                    index, expert_size = self.router(expert_ids)
                    return self.experts(x[index], expert_size)
        """,
        after="""
            import torch
            import torch.nn.functional as F
            from torch import nn


            class ParallelExperts(nn.Module):
                def __init__(self, num_experts, size):
                    super().__init__()
                    self.weight = nn.Parameter(torch.randn(num_experts, size, size))
                    self.num_experts = num_experts

                def forward(self, inputs, expert_size):
                    if not torch.compiler.is_compiling():
                        input_list = inputs.split(expert_size, dim=0)
                        output_list = []
                        for i in range(self.num_experts):
                            output_list.append(F.linear(input_list[i], self.weight[i]))
                        results = torch.cat(output_list, dim=0)
                    else:
                        output_list = []
                        for i in range(self.num_experts):
                            output_list.append(F.linear(inputs, self.weight[i]))
                        _mend_rows0 = torch.arange(inputs.shape[0], device=inputs.device)
                        _mend_ends1 = torch.as_tensor(expert_size, device=inputs.device).cumsum(0)
                        _mend_group2 = (_mend_rows0[:, None] >= _mend_ends1[None, :]).sum(1)
                        results = torch.stack(output_list, 0)[_mend_group2, _mend_rows0]
                    return results


            class Router(nn.Module):
                def forward(self, expert_ids):
                    index = expert_ids.argsort()
                    expert_size = nn.functional.one_hot(expert_ids, 2).sum(0)
                    if not torch.compiler.is_compiling():
                        expert_size = expert_size.tolist()
                    return index, expert_size


            class MoE(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.router = Router()
                    self.experts = ParallelExperts(2, 4)

                def forward(self, x, expert_ids):
                    index, expert_size = self.router(expert_ids)
                    return self.experts(x[index], expert_size)
        """,
        run="compile(MoE())(torch.ones(3, 4), torch.tensor([1, 0, 1]))",
        unsafe=True,
    ),
)


_WHY = ("grouped MoE experts: the router keeps its per-expert counts as a tensor under compile and the "
        "experts run every expert on every row and pick each row's own")


@dataclass
class _SplitSite:
    """An experts ``forward(self, inputs, sizes)`` of the split/loop/cat shape."""

    cls: cst.ClassDef
    func: cst.FunctionDef
    stmts: list[cst.BaseStatement]  # split, list, loop, cat: consecutive statements of the body
    inputs: str
    sizes: str
    sizes_index: int  # the position of ``sizes`` among the call arguments (``self`` not counted)


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    call = tolist_call(ctx, diag)
    return call if isinstance(call, Decline) else expert_split_plan(ctx, diag, call)


def expert_split_plan(ctx: FileContext, diag: Diagnostic, call: cst.Call) -> Plan | Decline | None:
    """The repair of the router ``sizes = counts.tolist()`` at ``call`` together with the experts modules
    of the file that split by it; a decline when the pattern is there but unproven; None when the
    ``.tolist()`` is not a router of grouped experts."""
    ctx.prepare_all()
    router = _router(ctx, call)
    if router is None:
        return None
    stmt, name, position = router
    sites = _split_sites(ctx)
    if not sites:
        return None
    router_cls = ctx.enclosing_class(stmt)
    if router_cls is None:
        return Decline(diag, "grouped MoE experts not rewritten: the router is not a module method")
    skip = {id(ctx.enclosing_function(stmt))} | {id(s.func) for s in sites}
    problem = _check_consumers(ctx, router_cls.name.value, position, sites, skip)
    if problem is not None:
        return Decline(diag, f"grouped MoE experts not rewritten: {problem}")
    torch, imports = ctx.torch_name()
    edits: list = [(stmt, eager_else(torch, [stmt]))]
    for site in sites:
        edits.extend(_site_edits(ctx, site, torch))
    return Plan(diag, _WHY + " (unsafe: within float tolerance; expert FLOPs x number of experts)", "unsafe",
                edits, imports=imports)


# --- the router -------------------------------------------------------------------------------------------


def _router(ctx: FileContext, call: cst.Call) -> tuple[cst.SimpleStatementLine, str, int] | None:
    """``name = <tensor>.tolist()`` whose name is then only returned, as element ``position`` of the
    returned tuple: (statement, name, position)."""
    stmt = ctx.statement_line(call)
    if stmt is None or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Assign):
        return None
    assign = stmt.body[0]
    if assign.value is not call or len(assign.targets) != 1 or not isinstance(assign.targets[0].target, cst.Name):
        return None
    name = assign.targets[0].target.value
    func = ctx.enclosing_function(stmt)
    if func is None or ctx.parent(ctx.parent(stmt)) is not func:
        return None
    body = list(func.body.body)
    after = body[body.index(stmt) + 1:]
    position = None
    for later in after:
        ret = later.body[0] if isinstance(later, cst.SimpleStatementLine) and len(later.body) == 1 else None
        if isinstance(ret, cst.Return) and isinstance(ret.value, cst.Tuple):
            names = [code(e.value) for e in ret.value.elements]
            if names.count(name) == 1 and sum(code(n) == name for n in _names(ret)) == 1:
                position = names.index(name)
                continue
        if any(n.value == name for n in _names(later)):
            return None
    return (stmt, name, position) if position is not None else None


def _names(node: cst.CSTNode) -> list[cst.Name]:
    return [n for n in walk(node) if isinstance(n, cst.Name)]


# --- the experts modules -------------------------------------------------------------------------------


def _split_sites(ctx: FileContext) -> list[_SplitSite]:
    sites = []
    for cls in (n for n in walk(ctx.module) if isinstance(n, cst.ClassDef)):
        for func in cls.body.body:
            if isinstance(func, cst.FunctionDef) and func.name.value == "forward":
                site = _split_site(ctx, cls, func)
                if site is not None:
                    sites.append(site)
    return sites


def _split_site(ctx: FileContext, cls: cst.ClassDef, func: cst.FunctionDef) -> _SplitSite | None:
    params = [p.name.value for p in func.params.params]
    if not isinstance(func.body, cst.IndentedBlock) or len(params) < 3 or params[0] != "self":
        return None
    body = list(func.body.body)
    for k in range(len(body) - 3):
        split, init, loop, cat = body[k:k + 4]
        parts = _split(split, params)
        if parts is None:
            continue
        chunks, inputs, sizes = parts
        out = empty_list(init)
        if out is None or not isinstance(loop, cst.For) or concatenated(ctx, cat, out) is None:
            continue
        if not _row_wise_loop(ctx, loop, chunks, out):
            continue
        later = body[k + 4:]
        if any(n.value in (chunks, out) for s in later for n in _names(s)):
            continue
        return _SplitSite(cls, func, [split, init, loop, cat], inputs, sizes, params.index(sizes) - 1)
    return None


def _split(stmt: cst.CSTNode, params: list[str]) -> tuple[str, str, str] | None:
    """``chunks = inputs.split(sizes, dim=0)`` (or ``, 0``) on two parameters: (chunks, inputs, sizes)."""
    a = assign_to_name(stmt)
    if a is None:
        return None
    chunks, value = a
    if not (isinstance(value, cst.Call) and isinstance(value.func, cst.Attribute) and value.func.attr.value == "split"
            and isinstance(value.func.value, cst.Name) and value.func.value.value in params[1:]):
        return None
    args = value.args
    if not args or args[0].keyword is not None or not isinstance(args[0].value, cst.Name) \
            or args[0].value.value not in params[1:]:
        return None
    dims = [code(a.value) for a in args[1:] if a.keyword is None or a.keyword.value == "dim"]
    if len(args) > 2 or dims not in ([], ["0"]):
        return None
    return chunks, value.func.value.value, args[0].value.value


def _row_wise_loop(ctx: FileContext, loop: cst.For, chunks: str, out: str) -> bool:
    """``for i in range(...): out.append(F.linear(chunks[i], ...))`` (or ``chunks[i] @ w``): the only use of
    the chunks is the one row-wise operand."""
    if not (isinstance(loop.target, cst.Name) and isinstance(loop.iter, cst.Call) and code(loop.iter.func) == "range"
            and loop.orelse is None and isinstance(loop.body, cst.IndentedBlock) and len(loop.body.body) == 1):
        return False
    call = single_statement(loop.body.body[0])
    call = call.value if isinstance(call, cst.Expr) else None
    if not (isinstance(call, cst.Call) and code(call.func) == f"{out}.append" and len(call.args) == 1):
        return False
    expr = call.args[0].value
    index = f"{chunks}[{loop.target.value}]"
    if sum(n.value == chunks for n in _names(expr)) != 1:
        return False
    if isinstance(expr, cst.BinaryOperation) and isinstance(expr.operator, cst.MatrixMultiply):
        return code(expr.left) == index
    return (isinstance(expr, cst.Call) and ctx.imports.qualify(expr.func) == "torch.nn.functional.linear"
            and bool(expr.args) and expr.args[0].keyword is None and code(expr.args[0].value) == index)


def _site_edits(ctx: FileContext, site: _SplitSite, torch: str) -> list:
    split, init, loop, cat = site.stmts
    chunks = assign_to_name(split)[0]
    result = assign_to_name(cat)[0]
    out = empty_list(init)
    target = loop.target.value
    index = f"{chunks}[{target}]"

    class _Whole(cst.CSTTransformer):
        def leave_Subscript(self, original: cst.Subscript, updated: cst.Subscript) -> cst.BaseExpression:
            return cst.Name(site.inputs) if code(original) == index else updated

    compiled_loop = loop.visit(_Whole()).with_changes(leading_lines=[])
    rows, ends, group = ctx.fresh("rows"), ctx.fresh("ends"), ctx.fresh("group")
    compiled = [
        init.with_changes(leading_lines=[]),
        compiled_loop,
        parse_stmt(f"{rows} = {torch}.arange({site.inputs}.shape[0], device={site.inputs}.device)\n"),
        parse_stmt(f"{ends} = {torch}.as_tensor({site.sizes}, device={site.inputs}.device).cumsum(0)\n"),
        parse_stmt(f"{group} = ({rows}[:, None] >= {ends}[None, :]).sum(1)\n"),
        parse_stmt(f"{result} = {torch}.stack({out}, 0)[{group}, {rows}]\n"),
    ]
    split_if = eager_else(torch, site.stmts, compiled)
    return [(split, split_if), (init, cst.RemoveFromParent()), (loop, cst.RemoveFromParent()),
            (cat, cst.RemoveFromParent())]


# --- where the counts go -------------------------------------------------------------------------------


def _check_consumers(ctx: FileContext, router_cls: str, position: int, sites: list[_SplitSite],
                     skip: set[int]) -> str | None:
    """Every value the router's counts reach in this file (by name: the unpacked router result, and the
    tuples that carry it) is an experts module's count argument or a tuple element: None, else the problem.
    The functions in ``skip`` (the router and the experts, checked on their own) are not searched."""
    attrs = _instance_attrs(ctx)
    router_attrs = {a for a, c in attrs.items() if c == router_cls}
    experts = {a: s for a, c in attrs.items() for s in sites if s.cls.name.value == c}
    if not router_attrs:
        return f"no module attribute holds a `{router_cls}` in this file"
    names: set[str] = set()
    carriers: dict[str, int] = {}  # tuple name -> the element that holds the counts
    for node in walk(ctx.module):
        bound = _unpacked(node, position, lambda v: isinstance(v, cst.Call) and self_attr(v.func) in router_attrs)
        if bound is not None:
            names.add(bound)
    if not names:
        return f"the `{router_cls}` result is not unpacked into names in this file"
    funcs = [f for f in walk(ctx.module) if isinstance(f, cst.FunctionDef) and id(f) not in skip]
    pending = set(names)
    while pending:
        name = pending.pop()
        for func in funcs:
            for use in (n for n in _names(func.body) if n.value == name):
                problem = _check_use(ctx, use, experts, carriers)
                if problem is not None:
                    return problem
        for carrier, k in list(carriers.items()):
            for node in walk(ctx.module):
                bound = _unpacked(node, k, lambda v, c=carrier: isinstance(v, cst.Name) and v.value == c)
                if bound is not None and bound not in names:
                    names.add(bound)
                    pending.add(bound)
    return None


def _instance_attrs(ctx: FileContext) -> dict[str, str]:
    """``self.attr = ClassName(...)`` anywhere in the file: attr -> class name."""
    found = {}
    for node in walk(ctx.module):
        a = node if isinstance(node, cst.Assign) else None
        if a is not None and len(a.targets) == 1 and self_attr(a.targets[0].target) \
                and isinstance(a.value, cst.Call) and isinstance(a.value.func, cst.Name):
            found[self_attr(a.targets[0].target)] = a.value.func.value
    return found



def _unpacked(node: cst.CSTNode, position: int, source) -> str | None:
    """The name bound at ``position`` by ``a, b, ... = <source>``."""
    if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Tuple) \
            and source(node.value):
        elts = node.targets[0].target.elements
        if position < len(elts) and isinstance(elts[position].value, cst.Name):
            return elts[position].value.value
    return None


def _check_use(ctx: FileContext, use: cst.Name, experts: dict[str, _SplitSite], carriers: dict[str, int]) -> str | None:
    parent = ctx.parent(use)
    if isinstance(parent, (cst.AssignTarget, cst.Element)) and isinstance(ctx.parent(parent), cst.Tuple):
        tup = ctx.parent(parent)
        holder = ctx.parent(tup)
        if isinstance(holder, cst.AssignTarget) or (isinstance(parent, cst.Element) and isinstance(
                ctx.parent(holder), cst.AssignTarget)):
            return None  # bound by an unpacking
        if isinstance(holder, cst.Assign) and holder.value is tup and len(holder.targets) == 1 \
                and isinstance(holder.targets[0].target, cst.Name):
            carriers[holder.targets[0].target.value] = list(tup.elements).index(parent)
            return None
    if isinstance(parent, cst.Arg) and parent.keyword is None:
        call = ctx.parent(parent)
        site = experts.get(self_attr(call.func)) if isinstance(call, cst.Call) else None
        if site is not None and list(call.args).index(parent) == site.sizes_index:
            return None
    where = ctx.parent(parent) if isinstance(parent, cst.Arg) else parent
    return f"the counts reach `{code(where) if where is not None else use.value}`, which this repair does not rewrite"
