"""MND402 varying Python ints/floats at the call sites of a compiled object: ``dynamic=True`` on its compile.

When the object is defined in the same file by ``name = torch.compile(target, ...)`` or an ``@torch.compile``
decorator without ``dynamic=``, ``dynamic=True`` is added there (``@torch.compile`` becomes
``@torch.compile(dynamic=True)``): Dynamo then traces the numbers symbolically from the first compile
(tensor sizes 0 and 1 are still specialized; on torch 2.13 int/float arguments 0 and 1 are not, but
switching an argument between int and float still recompiles). Unsafe: outputs are unchanged, but dynamic
shapes apply to every input (performance can change; rarely, tracing raises where static tracing did not).
Declined when ``dynamic=`` (or ``**options``) is already given, or the definition is not in the file or not
unique.
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import COMPILE_NAMES
from mend.rewriter.analysis import code, walk
from mend.rewriter.context import FileContext
from mend.rewriter.plan import Decline, Example, Plan

EXAMPLES = (
    Example(
        rule="MND402",
        before="""
            import torch


            def scale(x, n):
                return x * n + 1


            f = torch.compile(scale, backend="eager")
            out = [f(torch.ones(2), 2), f(torch.ones(2), 3), f(torch.ones(2), 4)]
        """,
        after="""
            import torch


            def scale(x, n):
                return x * n + 1


            f = torch.compile(scale, backend="eager", dynamic=True)
            out = [f(torch.ones(2), 2), f(torch.ones(2), 3), f(torch.ones(2), 4)]
        """,
        run="out",
        unsafe=True,
    ),
)


def _is_compile(ctx: FileContext, expr: cst.BaseExpression) -> bool:
    return ctx.imports.qualify(expr) in COMPILE_NAMES


def _compile_definitions(ctx: FileContext, name: str) -> list[tuple[cst.CSTNode, cst.CSTNode]]:
    """``(binding, compile node)`` for each ``name = torch.compile(...)`` / ``@torch.compile def name``."""
    found: list[tuple[cst.CSTNode, cst.CSTNode]] = []
    for node in walk(ctx.module):
        if isinstance(node, cst.Assign) and len(node.targets) == 1 and \
                isinstance(node.targets[0].target, cst.Name) and node.targets[0].target.value == name and \
                isinstance(node.value, cst.Call) and _is_compile(ctx, node.value.func):
            found.append((node, node.value))
        elif isinstance(node, (cst.FunctionDef, cst.ClassDef)) and node.name.value == name:
            for dec in node.decorators:
                d = dec.decorator
                if _is_compile(ctx, d.func if isinstance(d, cst.Call) else d):
                    found.append((node, dec))
    return found


_DYNAMIC = cst.Arg(value=cst.Name("True"), keyword=cst.Name("dynamic"),
                   equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                         whitespace_after=cst.SimpleWhitespace("")))


def _add_dynamic(node: cst.CSTNode) -> cst.CSTNode:
    if isinstance(node, cst.Decorator):
        d = node.decorator
        if not isinstance(d, cst.Call):
            return node.with_changes(decorator=cst.Call(func=d, args=[_DYNAMIC]))
        return node.with_changes(decorator=_add_dynamic(d))
    assert isinstance(node, cst.Call)
    return node.with_changes(args=[*node.args, _DYNAMIC])


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    call = ctx.find(cst.Call, diag, pred=lambda n: isinstance(n.func, cst.Name))
    if call is None:
        return Decline(diag, "could not find the call of the compiled object at this position; pass the "
                             "varying number as a 0-d tensor (`torch.tensor(n)`)")
    name = call.func.value
    ctx.prepare_all()  # the definition may be anywhere in the file
    defs = _compile_definitions(ctx, name)
    scope = ctx.enclosing_function(call)
    local = [d for d in defs if ctx.enclosing_function(d[0]) is scope]
    if not local and scope is not None:
        local = [d for d in defs if ctx.enclosing_function(d[0]) is None]
    if not local:
        return Decline(diag, f"`{name}` is not defined by `torch.compile(...)` in this file; add "
                             "`dynamic=True` where it is compiled, or pass the number as a 0-d tensor")
    if len(local) > 1:
        return Decline(diag, f"`{name}` is compiled in more than one place; add `dynamic=True` by hand")
    _binding, node = local[0]
    compile_call = node.decorator if isinstance(node, cst.Decorator) else node
    if isinstance(compile_call, cst.Call):
        given = next((a for a in compile_call.args if a.keyword is not None and a.keyword.value == "dynamic"),
                     None)
        if given is not None and isinstance(given.value, cst.Name) and given.value.value == "True":
            return Decline(diag, f"`{name}` is already compiled with `dynamic=True`; a "
                                 "remaining recompile comes from an int/float switch or a size of 0 or 1")
        if given is not None:
            return Decline(diag, f"`{name}` is compiled with an explicit `dynamic={code(given.value)}`; pass the "
                                 "varying number as a 0-d tensor (`torch.tensor(n)`) instead")
        if any(a.star for a in compile_call.args):
            return Decline(diag, f"`{name}` is compiled with `*`/`**` options that may set `dynamic=`; "
                                 "add `dynamic=True` by hand")
    return Plan(diag, f"compile `{name}` with `dynamic=True` (the numbers are traced symbolically)", "unsafe",
                [(node, _add_dynamic(node))])
