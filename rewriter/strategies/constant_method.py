"""Sizes computed inside a method of Python values (MND310/MND311): the method folded to constants under compile.

Funnel's relative positions are tensors built from ``torch.arange(0, seq_len)`` and read back as the bounds
of other ranges (``torch.arange(max_dist, min_dist - 1, -stride)`` with ``max_dist = pooled_pos[0] -
pos[0] + ...``): Dynamo breaks at every range. Yet everything the method computes comes from its arguments
(``seq_len: int``, a dtype, a device) and the model's config: its results are constants of the model for
a given input size. The repair runs such a method while Dynamo traces and hands its results on as
constants of the graph:

    def get_position_embeds(self, seq_len: int, dtype: torch.dtype, device: torch.device):
        if torch.compiler.is_compiling() and not _mend_constant.active and not any(m.training for m in self.modules()):
            return _mend_constant(FunnelAttentionStructure.get_position_embeds, self, seq_len, dtype, device)
        ...  # the original, for eager (and while the fold runs it)

A method qualifies when it contains the site (or reaches it through ``self.`` calls of its class), every
parameter is annotated as a Python value (``int``, ``float``, ``bool``, ``str``, a dtype, a device), and
it and the methods it calls read of the module only other methods, ``self.config`` and dropout modules
built in ``__init__`` (no parameter, buffer or state set at run time), call only torch, ``math`` and
builtins, draw no random numbers and assign no attribute. Dropout is the identity only in eval mode: the
fold runs only when no submodule is training (else the original runs, breaks included).

Eager runs the original code. Compiled code gets the values the same code computes, on the same device
(the method runs for real while Dynamo traces). **Unsafe**: the constants are computed once per traced
input size; a config changed after compilation is not seen by the compiled graph, and the graph holds the
constants' memory. ``mend check`` still reports the sites inside the methods the folded one calls (it does
not see that only the folded method calls them); ``mend fix`` says the method is folded already.
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import HELPERS_ACT_FROM, HELPERS_ACT_NOTE, is_random_op
from mend.rewriter.analysis import code, dotted, is_docstring, parse_stmt, self_attr, walk
from mend.rewriter.context import FileContext
from mend.rewriter.parts.sites import size_site
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND310",
        before='''
            import torch
            from torch import nn


            class RelativePositions(nn.Module):
                """Funnel's relative positions: tensors computed only from the input's length."""

                def position_embeds(self, seq_len: int, dtype: torch.dtype):
                    pos = torch.arange(0, seq_len, dtype=torch.int64).to(dtype)
                    return self.relative_pos(pos, 2)

                def relative_pos(self, pos: torch.Tensor, stride: int) -> torch.Tensor:
                    max_dist = pos[0] - pos[0] + len(pos) * stride
                    min_dist = pos[0] - pos[-1]
                    return torch.arange(max_dist, min_dist - 1, -stride, dtype=torch.long)

                def forward(self, x):
                    return x.sum() + self.position_embeds(x.shape[1], x.dtype).sum()
        ''',
        after='''
            import torch
            from torch import nn
            from _mend import constant as _mend_constant


            class RelativePositions(nn.Module):
                """Funnel's relative positions: tensors computed only from the input's length."""

                def position_embeds(self, seq_len: int, dtype: torch.dtype):
                    if torch.compiler.is_compiling() and not _mend_constant.active:
                        return _mend_constant(RelativePositions.position_embeds, self, seq_len, dtype)
                    pos = torch.arange(0, seq_len, dtype=torch.int64).to(dtype)
                    return self.relative_pos(pos, 2)

                def relative_pos(self, pos: torch.Tensor, stride: int) -> torch.Tensor:
                    max_dist = pos[0] - pos[0] + len(pos) * stride
                    min_dist = pos[0] - pos[-1]
                    return torch.arange(max_dist, min_dist - 1, -stride, dtype=torch.long)

                def forward(self, x):
                    return x.sum() + self.position_embeds(x.shape[1], x.dtype).sum()
        ''',
        run="compile(RelativePositions())(torch.ones(2, 5))",
        unsafe=True,
    ),
)


_WHY = ("run the method, computed only from Python values and the config, while Dynamo traces: its results "
        "become constants of the graph (unsafe: computed once per traced input size; a config changed after "
        "compilation is not seen)" + HELPERS_ACT_NOTE)
_PYTHON_TYPES = {"int", "float", "bool", "str", "torch.dtype", "torch.device"}
_BUILTINS = {"range", "len", "int", "float", "min", "max", "list", "tuple", "enumerate", "zip", "isinstance", "abs",
             "round", "sum"}
_DROPOUT = {"torch.nn.Dropout", "torch.nn.modules.dropout.Dropout", "torch.nn.Identity"}


class _NotConstant(Exception):
    """The method reads or does something that is not a constant of the model (the message says what)."""


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    site = size_site(ctx, diag)
    return site if isinstance(site, Decline) else constant_method_plan(ctx, diag, site)


def constant_method_plan(ctx: FileContext, diag: Diagnostic, node: cst.CSTNode) -> Plan | Decline | None:
    """The plan folding the method of Python values around ``node``, a decline, or None (no such method)."""
    cls, func = ctx.enclosing_class(node), ctx.enclosing_function(node)
    if cls is None or func is None:
        return None
    methods = {m.name.value: m for m in cls.body.body if isinstance(m, cst.FunctionDef)}
    folded = next((m for m in methods.values() if _python_valued(ctx, m) and func.name.value in _reach(m, methods)),
                  None)
    if folded is None:
        return None
    if "_mend_constant" in code(folded):
        return Decline(diag, "the method of Python values around it is folded already; this site is reached "
                             "another way")
    try:
        dropout = _check_constant(ctx, cls, methods, _reach(folded, methods))
    except _NotConstant as why:
        return Decline(diag, f"`{folded.name.value}` takes only Python values, but {why}")
    torch, imports = ctx.torch_name()
    too_old = ctx.options.torch_before(HELPERS_ACT_FROM)
    if too_old:
        return Decline(diag, too_old)
    return Plan(diag, f"{_WHY}: `{cls.name.value}.{folded.name.value}`", "unsafe",
                [(folded, _fold(torch, cls.name.value, folded, dropout))], imports=imports,
                helpers=["_mend_constant"])


def _python_valued(ctx: FileContext, method: cst.FunctionDef) -> bool:
    """Every parameter but ``self`` annotated as a Python value; no ``*args``/``**kwargs``/keyword-only."""
    p = method.params
    if isinstance(p.star_arg, cst.Param) or p.star_kwarg is not None or p.kwonly_params or p.posonly_params:
        return False
    params = list(p.params)
    if not params or params[0].name.value != "self" or len(params) == 1:
        return False
    return all(q.annotation is not None and (ctx.imports.qualify(q.annotation.annotation)
                                             or code(q.annotation.annotation)) in _PYTHON_TYPES
               for q in params[1:])


def _reach(method: cst.FunctionDef, methods: dict[str, cst.FunctionDef]) -> set[str]:
    """``method`` and the methods of its class it calls through ``self.``, transitively."""
    seen, work = {method.name.value}, [method]
    while work:
        for n in walk(work.pop().body):
            if isinstance(n, cst.Call) and self_attr(n.func) in methods and self_attr(n.func) not in seen:
                seen.add(self_attr(n.func))
                work.append(methods[self_attr(n.func)])
    return seen



def _check_constant(ctx: FileContext, cls: cst.ClassDef, methods: dict[str, cst.FunctionDef],
                    reached: set[str]) -> bool:
    """Raise :class:`_NotConstant` unless the reached methods compute only from their arguments and the
    config; returns whether they read a dropout module (the fold then needs eval mode)."""
    dropouts = _dropouts(ctx, methods.get("__init__"))
    config_written = any(self_attr(t) == "config" for name, m in methods.items() if name != "__init__"
                         for t in _assigned(m))
    uses_dropout = False
    for name in sorted(reached):
        method = methods[name]
        if _assigned(method):
            raise _NotConstant(f"`{name}` assigns `{code(_assigned(method)[0])}` (module state)")
        for n in walk(method.body):
            attr = self_attr(n) if isinstance(n, cst.Attribute) else None
            if attr is not None and attr not in methods:
                if attr in dropouts:
                    uses_dropout = True
                elif attr != "config" or config_written:
                    raise _NotConstant(f"`{name}` reads `self.{attr}`, which may be module state (a parameter, a "
                                       "buffer, a value set at run time)")
            if isinstance(n, cst.Call):
                _check_call(ctx, name, n)
    return uses_dropout


def _check_call(ctx: FileContext, name: str, call: cst.Call) -> None:
    if self_attr(call.func) is not None:
        return  # a method of the class (checked itself) or a dropout module
    qual = ctx.imports.qualify(call.func) or ""
    if qual.startswith("torch."):
        if is_random_op(qual.rsplit(".", 1)[-1]):
            raise _NotConstant(f"`{name}` draws random numbers (`{code(call.func)}`)")
        return
    if qual.startswith("math.") or (isinstance(call.func, cst.Name) and call.func.value in _BUILTINS):
        return
    if isinstance(call.func, cst.Attribute) and _computed(ctx, call.func.value):  # `.to()`, `.append()`
        meth = call.func.attr.value
        if is_random_op(meth) or (meth.endswith("_") and not meth.startswith("_")):
            raise _NotConstant(f"`{name}` calls `{code(call.func)}` (random or in place)")
        return
    raise _NotConstant(f"`{name}` calls `{code(call.func)}`, which mend cannot see is a constant of the model")


def _computed(ctx: FileContext, e: cst.BaseExpression) -> bool:
    """A value the method computed (a call's or a subscript's result, a local), not an imported module."""
    text = dotted(e)
    return text is None or text.split(".", 1)[0] not in ctx.imports.names


def _assigned(method: cst.FunctionDef) -> list[cst.BaseExpression]:
    """The attributes and subscripts of ``self`` the method assigns."""
    out = []
    for n in walk(method.body):
        targets = [t.target for t in n.targets] if isinstance(n, cst.Assign) else \
            [n.target] if isinstance(n, (cst.AugAssign, cst.AnnAssign)) else []
        out += [t for t in targets if self_attr(t) is not None]
    return out


def _dropouts(ctx: FileContext, init: cst.FunctionDef | None) -> set[str]:
    """Attributes ``__init__`` binds to ``nn.Dropout(...)`` (or ``nn.Identity()``): no parameters."""
    if init is None:
        return set()
    out = set()
    for n in walk(init.body):
        if isinstance(n, cst.Assign) and len(n.targets) == 1 and self_attr(n.targets[0].target) is not None \
                and isinstance(n.value, cst.Call) and ctx.imports.qualify(n.value.func) in _DROPOUT:
            out.add(self_attr(n.targets[0].target))
    return out


def _fold(torch: str, cls_name: str, method: cst.FunctionDef, dropout: bool) -> cst.FunctionDef:
    args = ", ".join(["self", *(p.name.value for p in list(method.params.params)[1:])])
    test = f"{torch}.compiler.is_compiling() and not _mend_constant.active"
    if dropout:
        test += " and not any(m.training for m in self.modules())"
    guard = parse_stmt(f"if {test}:\n    return _mend_constant({cls_name}.{method.name.value}, {args})\n")
    body = list(method.body.body)
    at = 1 if body and is_docstring(body[0]) else 0
    return method.with_changes(body=method.body.with_changes(body=[*body[:at], guard, *body[at:]]))

