"""Rows routed by runs of equal ids to the module each id names (MND304 on ``torch.unique_consecutive``).

X-MOD routes each sample to the adapter of its language. Runs of equal ids are found, the batch is split
into those runs, and each run goes through the module its id picks::

    lang_ids, lang_lengths = torch.unique_consecutive(lang_ids, return_counts=True)   # a break
    ...
    split_hidden_states = torch.split(hidden_states, lang_lengths.tolist(), 0)         # a break
    lang_wise_outputs = []
    for i, (lang_id, split_hidden_state) in enumerate(zip(lang_ids, split_hidden_states)):
        lang = list(self.adapter_modules.keys())[int(lang_id.item())]                  # a break
        lang_wise_outputs.append(self.adapter_modules[lang](split_hidden_state))
    hidden_states = torch.cat(lang_wise_outputs, 0)

Under compile the ids stay one per row and every module runs on every row; each row takes the output of
the module its own id names (``_mend_grouped_rows``: ``torch.stack`` of the outputs, indexed by the ids and
the row numbers; static shapes)::

    if not torch.compiler.is_compiling():
        lang_ids, lang_lengths = torch.unique_consecutive(lang_ids, return_counts=True)
    else:
        lang_ids, lang_lengths = lang_ids, None
    ...
    if not torch.compiler.is_compiling():
        <the split, the list, the loop and the concatenation>
    else:
        hidden_states = _mend_grouped_rows(lang_ids, list(self.adapter_modules.values()), hidden_states)

A run of equal ids holds consecutive rows, the runs are concatenated back in order, so row ``r`` of the
original's result is the output, for that row, of the module named by row ``r``'s id. **Unsafe**: equal
within float tolerance, not bitwise (a matmul over more rows may round differently); every module runs on
every row (their FLOPs grow by the number of modules); the modules must treat rows independently; an id
out of range raises another error. Matched only where the runs, the counts, the chunks and the list are
read nowhere else, and the modules are a ``self.`` module dict indexed through ``list(d.keys())``.
"""

from __future__ import annotations

from dataclasses import dataclass

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import code, eager_else, names_in, parse_stmt, strip_parens
from mend.rewriter.context import FileContext
from mend.rewriter.parts.experts import concatenated, empty_list
from mend.rewriter.parts.sites import any_call
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND304",
        before='''
            import torch
            from torch import nn


            class LanguageAdapters(nn.Module):
                """X-MOD: each run of samples goes through the adapter of its language."""

                def __init__(self, dim=4):
                    super().__init__()
                    self.adapter_modules = nn.ModuleDict({lang: nn.Linear(dim, dim) for lang in ("en", "de")})

                def forward(self, hidden_states, lang_ids):
                    lang_ids, lang_lengths = torch.unique_consecutive(lang_ids, return_counts=True)
                    split_hidden_states = torch.split(hidden_states, lang_lengths.tolist(), 0)
                    lang_wise_outputs = []
                    for i, (lang_id, split_hidden_state) in enumerate(zip(lang_ids, split_hidden_states)):
                        lang = list(self.adapter_modules.keys())[int(lang_id.item())]
                        lang_wise_outputs.append(self.adapter_modules[lang](split_hidden_state))
                    hidden_states = torch.cat(lang_wise_outputs, 0)
                    return hidden_states
        ''',
        after='''
            import torch
            from torch import nn
            from _mend import grouped_rows as _mend_grouped_rows


            class LanguageAdapters(nn.Module):
                """X-MOD: each run of samples goes through the adapter of its language."""

                def __init__(self, dim=4):
                    super().__init__()
                    self.adapter_modules = nn.ModuleDict({lang: nn.Linear(dim, dim) for lang in ("en", "de")})

                def forward(self, hidden_states, lang_ids):
                    if not torch.compiler.is_compiling():
                        lang_ids, lang_lengths = torch.unique_consecutive(lang_ids, return_counts=True)
                    else:
                        lang_ids, lang_lengths = lang_ids, None
                    if not torch.compiler.is_compiling():
                        split_hidden_states = torch.split(hidden_states, lang_lengths.tolist(), 0)
                        lang_wise_outputs = []
                        for i, (lang_id, split_hidden_state) in enumerate(zip(lang_ids, split_hidden_states)):
                            lang = list(self.adapter_modules.keys())[int(lang_id.item())]
                            lang_wise_outputs.append(self.adapter_modules[lang](split_hidden_state))
                        hidden_states = torch.cat(lang_wise_outputs, 0)
                    else:
                        hidden_states = _mend_grouped_rows(lang_ids, list(self.adapter_modules.values()), hidden_states)
                    return hidden_states
        ''',
        run="compile(LanguageAdapters())(torch.ones(3, 4), torch.tensor([0, 0, 1]))",
        unsafe=True,
    ),
)


_WHY = ("rows routed by runs of equal ids: under compile every module runs on every row and each row takes "
        "its own id's output (unsafe: within float tolerance; module FLOPs x number of modules)")


class _NotRouted(Exception):
    """The site has the routing shape, but one this repair cannot prove (the message says why)."""


@dataclass
class _Routing:
    runs: cst.SimpleStatementLine  # ``U, C = torch.unique_consecutive(I, return_counts=True)``
    ids: str  # I
    names: tuple[str, str]  # U, C
    stmts: list[cst.BaseStatement]  # the split, the list, the loop, the concatenation
    inputs: str  # the tensor split into runs
    modules: str  # the ``self.`` module dict
    result: str  # the concatenation's name


def _assigned(stmt: cst.CSTNode) -> tuple[list[str], cst.BaseExpression] | None:
    """(target names, value) of a one-assignment statement line."""
    if not (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign)):
        return None
    assign = stmt.body[0]
    if len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    if isinstance(target, cst.Name):
        return [target.value], assign.value
    if isinstance(target, cst.Tuple) and all(isinstance(e.value, cst.Name) for e in target.elements):
        return [e.value.value for e in target.elements], assign.value
    return None


def _runs(stmt: cst.CSTNode, call: cst.Call) -> tuple[str, str, str] | None:
    """(I, U, C) when ``stmt`` is ``U, C = torch.unique_consecutive(I, return_counts=True)`` around ``call``."""
    got = _assigned(stmt)
    if got is None or got[1] is not call or len(got[0]) != 2:
        return None
    positional = [a for a in call.args if a.keyword is None]
    keywords = {a.keyword.value: code(a.value) for a in call.args if a.keyword is not None}
    if len(positional) != 1 or not isinstance(positional[0].value, cst.Name) \
            or keywords != {"return_counts": "True"}:
        return None
    return positional[0].value.value, got[0][0], got[0][1]


def _counts_list(expr: cst.BaseExpression, counts: str) -> bool:
    """``C.tolist()``, also as ``_mend_captured(lambda: C.tolist())`` (another repair's form)."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.Call) and code(expr.func) == "_mend_captured" and len(expr.args) == 1 \
            and isinstance(expr.args[0].value, cst.Lambda):
        expr = strip_parens(expr.args[0].value.body)
    return code(expr) == f"{counts}.tolist()"


def _split(stmt: cst.CSTNode, counts: str, torch: str) -> tuple[str, str] | None:
    """(chunks, inputs) for ``P = torch.split(H, C.tolist(), 0)`` or ``P = H.split(C.tolist(), dim=0)``."""
    got = _assigned(stmt)
    if got is None or len(got[0]) != 1 or not isinstance(got[1], cst.Call):
        return None
    call = got[1]
    args = list(call.args)
    if code(call.func) == f"{torch}.split" and args and isinstance(args[0].value, cst.Name):
        inputs, args = args[0].value.value, args[1:]
    elif isinstance(call.func, cst.Attribute) and call.func.attr.value == "split" \
            and isinstance(call.func.value, cst.Name):
        inputs = call.func.value.value
    else:
        return None
    if not args or args[0].keyword is not None or not _counts_list(args[0].value, counts):
        return None
    dims = [code(a.value) for a in args[1:]]
    return (got[0][0], inputs) if dims in ([], ["0"]) and all(a.keyword in (None, "dim") for a in args[1:]) \
        else None


def _loop_modules(loop: cst.For, runs: str, chunks: str, out: str) -> str:
    """The module dict of ``for i, (u, p) in enumerate(zip(U, P)): k = list(D.keys())[int(u.item())];
    L.append(D[k](p))`` (or ``for u, p in zip(U, P)``)."""
    target, it = loop.target, strip_parens(loop.iter)
    if isinstance(it, cst.Call) and code(it.func) == "enumerate" and len(it.args) == 1 \
            and isinstance(target, cst.Tuple) and len(target.elements) == 2:
        it, target = strip_parens(it.args[0].value), target.elements[1].value
    if not (isinstance(it, cst.Call) and code(it) == f"zip({runs}, {chunks})" and isinstance(target, cst.Tuple)
            and len(target.elements) == 2 and all(isinstance(e.value, cst.Name) for e in target.elements)):
        raise _NotRouted("the loop does not walk the runs and the chunks together")
    run, chunk = (e.value.value for e in target.elements)
    body = loop.body.body if isinstance(loop.body, cst.IndentedBlock) else []
    if len(body) != 2 or loop.orelse is not None:
        raise _NotRouted("the loop does more than pick a module and apply it")
    key = _assigned(body[0])
    if key is None or len(key[0]) != 1:
        raise _NotRouted("the loop does not name the module's key first")
    value = strip_parens(key[1])
    if not (isinstance(value, cst.Subscript) and len(value.slice) == 1
            and code(value.slice[0].slice) in (f"int({run}.item())", f"{run}.item()")):
        raise _NotRouted("the key is not picked by the run's id")
    keys = code(value.value)
    if not (keys.startswith("list(self.") and keys.endswith(".keys())")):
        raise _NotRouted("the keys are not `list(self.<module dict>.keys())`")
    modules = keys[len("list("):-len(".keys())")]
    if code(body[1]).strip() != f"{out}.append({modules}[{key[0][0]}]({chunk}))":
        raise _NotRouted(f"the loop's second statement is not `{out}.append({modules}[{key[0][0]}]({chunk}))`")
    return modules


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    call = any_call(ctx, diag)
    return call if isinstance(call, Decline) else grouped_rows_plan(ctx, diag, call)


def grouped_rows_plan(ctx: FileContext, diag: Diagnostic, call: cst.Call) -> Plan | Decline | None:
    """The repair of the routing around ``call`` (its ``torch.unique_consecutive``), a decline when the
    code has the routing shape but cannot be proven, or None when it is no such routing."""
    torch, imports = ctx.torch_name()
    if code(call.func) != f"{torch}.unique_consecutive":
        return None
    stmt = ctx.statement_line(call)
    runs = _runs(stmt, call) if stmt is not None else None
    block = ctx.parent(stmt) if runs is not None else None
    if not isinstance(block, cst.IndentedBlock) or not isinstance(ctx.parent(block), cst.FunctionDef):
        return None  # a function's own body: what runs after it is the rest of that block
    try:
        routing = _routing(ctx, stmt, runs, list(block.body), torch)
    except _NotRouted as exc:
        return Decline(diag, f"routing by runs of ids not rewritten: {exc}")
    if routing is None:
        return None
    ids, (runs_name, counts) = routing.ids, routing.names
    compiled_runs = parse_stmt(f"{runs_name}, {counts} = {ids}, None\n")
    compiled = parse_stmt(f"{routing.result} = _mend_grouped_rows({runs_name}, list({routing.modules}.values()), "
                          f"{routing.inputs})\n")
    first, *rest = routing.stmts
    edits = [(stmt, eager_else(torch, [stmt], [compiled_runs])),
             (first, eager_else(torch, routing.stmts, [compiled]))]
    edits += [(s, cst.RemoveFromParent()) for s in rest]
    return Plan(diag, _WHY, "unsafe", edits, imports=imports, helpers=["_mend_grouped_rows"])


def _routing(ctx: FileContext, stmt: cst.SimpleStatementLine, runs: tuple[str, str, str],
             block: list[cst.BaseStatement], torch: str) -> _Routing | None:
    """The routing that follows ``stmt`` in ``block``; None when no split by its counts follows."""
    ids, runs_name, counts = runs
    after = block[block.index(stmt) + 1:]
    at = next((i for i, s in enumerate(after) if _split(s, counts, torch) is not None), None)
    if at is None or at + 3 >= len(after):
        return None
    chunks, inputs = _split(after[at], counts, torch)
    init, loop, cat = after[at + 1: at + 4]
    out = empty_list(init)
    if out is None or not isinstance(loop, cst.For):
        raise _NotRouted("the chunks are not collected by a loop into a new list")
    result = concatenated(ctx, cat, out)
    if result is None:
        raise _NotRouted("the outputs are not concatenated along the rows right after the loop")
    modules = _loop_modules(loop, runs_name, chunks, out)
    stmts = [after[at], init, loop, cat]
    between = after[:at]
    if names_in(cst.Module(body=between)) & {runs_name, counts}:
        raise _NotRouted("the runs or the counts are read before the split")
    loop_names = names_in(loop.target) | {_assigned(loop.body.body[0])[0][0]}
    later = names_in(cst.Module(body=after[at + 4:])) & ({runs_name, counts, chunks, out} | loop_names)
    if later:
        raise _NotRouted(f"`{sorted(later)[0]}` is read after the routing")
    return _Routing(stmt, ids, (runs_name, counts), stmts, inputs, modules, result)
