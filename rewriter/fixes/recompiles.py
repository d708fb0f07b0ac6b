"""Family 7: recompile triggers.

* MND401 ``self.step += 1`` on an int/float attribute in ``forward``: the attribute becomes a
  non-persistent registered buffer (``torch.tensor(0)``; floats as float64) in ``__init__``; the
  in-place update stays as written (a tensor ``+=`` is in place), and ``min(c, <expr of it>)`` /
  ``max(...)`` become ``torch.clamp``. Declined when the value reaches control flow, a call other than
  min/max, or is written in any other way. Unsafe: the attribute's type changes for code outside the
  class (``model.step`` is now a tensor).
* MND403 ``torch.compile`` inside a loop: ``name = torch.compile(<expr>)`` whose arguments are not
  rebound in the loop is hoisted before the loop (safe: the same object is compiled once).
* MND402 varying Python ints/floats at the call sites of a compiled object: when the object is
  defined in the same file by ``name = torch.compile(target, ...)`` or an ``@torch.compile`` decorator
  without ``dynamic=``, ``dynamic=True`` is added there (``@torch.compile`` becomes
  ``@torch.compile(dynamic=True)``): Dynamo then traces the numbers symbolically from the first compile
  (tensor sizes 0 and 1 are still specialized; on torch 2.13 int/float arguments 0 and 1 are not, but
  switching an argument between int and float still recompiles). Unsafe: outputs are unchanged, but dynamic shapes apply to every
  input (performance can change; rarely, tracing raises where static tracing did not). Declined when
  ``dynamic=`` (or ``**options``) is already given, or the definition is not in the file or not unique.
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import COMPILE_NAMES
from mend.rewriter.analysis import code, is_number, names_in, parse_expr, self_attr, walk
from mend.rewriter.engine import Decline, FileContext, Plan
from mend.rewriter.fixes.base import fixer


@fixer("MND401")
def fix_module_attr(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    stmt = ctx.find((cst.AugAssign, cst.Assign), diag)
    if stmt is None:
        return Decline(diag, "could not find the attribute update at this position")
    target = stmt.target if isinstance(stmt, cst.AugAssign) else (
        stmt.targets[0].target if len(stmt.targets) == 1 else None)
    attr = self_attr(target) if target is not None else None
    if attr is None:
        return Decline(diag, "the update is not to `self.<name>`")
    cls = ctx.enclosing_class(stmt)
    if cls is None:
        return Decline(diag, "the update is not inside a class")
    ctx.prepare_parents(cls)  # reads in every method are followed below
    init = next((s for s in cls.body.body if isinstance(s, cst.FunctionDef) and s.name.value == "__init__"), None)
    if init is None:
        return Decline(diag, "the class has no __init__ to register a buffer in")
    found = _init_assignment(init, attr)
    if isinstance(found, str):
        return Decline(diag, found)
    line, small = found
    torch, imports = ctx.torch_name()
    edits: list = []
    problem = _other_writes(cls, attr, small) or _reads(ctx, cls, attr, torch, edits)
    if problem is not None:
        return Decline(diag, problem)
    is_float = isinstance(small.value, cst.Float) or isinstance(getattr(small.value, "expression", None), cst.Float)
    dtype = f", dtype={torch}.float64" if is_float else ""
    new_line = line.with_changes(body=[cst.Expr(parse_expr(
        f'self.register_buffer("{attr}", {torch}.tensor({code(small.value)}{dtype}), persistent=False)'))])
    edits.append((line, new_line))
    return Plan(diag, f"`self.{attr}` becomes a registered buffer updated in place (no recompile per value)",
                "unsafe", edits, imports=imports)


def _init_assignment(init: cst.FunctionDef, attr: str) -> tuple[cst.SimpleStatementLine, cst.Assign] | str:
    """The one ``self.attr = <number>`` line of ``__init__`` (after ``super().__init__()``), or why not."""
    found = None
    seen_super = False
    for s in init.body.body:
        if not isinstance(s, cst.SimpleStatementLine):
            continue
        for small in s.body:
            if "super().__init__" in code(small) or "Module.__init__" in code(small):
                seen_super = True
            if isinstance(small, cst.Assign) and len(small.targets) == 1 and \
                    self_attr(small.targets[0].target) == attr:
                if found is not None:
                    return f"`self.{attr}` is assigned twice in __init__"
                if not seen_super:
                    return f"`self.{attr}` is set before `super().__init__()`"
                found = (s, small)
    if found is None:
        return f"`self.{attr}` is not initialised in __init__ with a number"
    if len(found[0].body) != 1 or not is_number(found[1].value):
        return f"`self.{attr}` is not initialised with a plain number literal"
    return found


def _other_writes(cls: cst.ClassDef, attr: str, init_assign: cst.Assign) -> str | None:
    """Every write of ``self.attr`` other than the one in ``__init__`` must be an in-place numeric update."""
    for node in walk(cls):
        if isinstance(node, cst.AugAssign) and self_attr(node.target) == attr:
            if not is_number(node.value) and not isinstance(node.value, cst.Name):
                return f"`self.{attr}` is updated with a non-number"
            continue
        if isinstance(node, cst.Assign) and any(self_attr(t.target) == attr for t in node.targets):
            if node is not init_assign:
                return f"`self.{attr}` is rebound with `=`; only `+=`-style updates keep a buffer"
    return None


def _reads(ctx: FileContext, cls: cst.ClassDef, attr: str, torch: str, edits: list) -> str | None:
    """Every read of ``self.attr`` must stay in tensor arithmetic (``min``/``max`` become clamps in ``edits``)."""
    for node in walk(cls):
        if self_attr(node) != attr or _is_store(ctx, node):
            continue
        res = _check_read(ctx, node, torch, edits, set())
        if res is not None:
            return res
    return None


def _is_store(ctx: FileContext, node: cst.CSTNode) -> bool:
    parent = ctx.parent(node)
    if isinstance(parent, cst.AugAssign) and parent.target is node:
        return True
    return isinstance(parent, cst.AssignTarget)


def _check_read(ctx: FileContext, node: cst.CSTNode, torch: str, edits: list, seen: set) -> str | None:
    """None when the value of ``node`` only flows into tensor arithmetic (adding clamp edits)."""
    cur = node
    while True:
        parent = ctx.parent(cur)
        if isinstance(parent, cst.BinaryOperation):
            other = parent.right if parent.left is cur else parent.left
            facts = ctx.facts(ctx.enclosing_function(parent))
            if facts.is_tensor(other):
                return None  # meets a tensor: the result is a tensor either way
            cur = parent
            continue
        if isinstance(parent, cst.Arg):
            call = ctx.parent(parent)
            fname = code(call.func) if isinstance(call, cst.Call) else ""
            others = [a.value for a in call.args if a is not parent] if isinstance(call, cst.Call) else []
            if fname in {"min", "max"} and len(call.args) == 2 and all(is_number(o) for o in others):
                kw = "max" if fname == "min" else "min"
                edits.append((call, parse_expr(f"{torch}.clamp({code(cur)}, {kw}={code(others[0])})")))
                cur = call
                continue
            return f"the value reaches a call to `{fname or '?'}`, which needs a Python number"
        if isinstance(parent, cst.Assign) and parent.value is cur:
            if len(parent.targets) != 1 or not isinstance(parent.targets[0].target, cst.Name):
                return "the value is stored somewhere mend cannot follow"
            name = parent.targets[0].target.value
            if name in seen:
                return None
            seen.add(name)
            facts = ctx.facts(ctx.enclosing_function(parent))
            if len(facts.stores.get(name, [])) != 1:
                return f"`{name}` is assigned more than once"
            for use in facts.loads.get(name, []):
                res = _check_read(ctx, use, torch, edits, seen)
                if res is not None:
                    return res
            return None
        if isinstance(parent, cst.Return):
            return "the value is returned (callers may expect a Python number)"
        if isinstance(parent, (cst.Comparison, cst.If, cst.While, cst.IfExp, cst.BooleanOperation)):
            return "the value reaches control flow (a tensor there would be a data-dependent branch)"
        return f"the value is used in a `{type(parent).__name__}` mend does not follow"


@fixer("MND403")
def fix_compile_in_loop(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    call = ctx.find(cst.Call, diag, pred=lambda n: _is_compile(ctx, n.func))
    if call is None:
        return Decline(diag, "could not find `torch.compile(...)` at this position")
    stmt = ctx.statement_line(call)
    loop = next((a for a in ctx.ancestors(call) if isinstance(a, (cst.For, cst.While, cst.FunctionDef))), None)
    if not isinstance(loop, (cst.For, cst.While)):
        return Decline(diag, "the compile call is in a repeatedly called function, not a loop; "
                             "move it to module level or cache the compiled object")
    if stmt is None or len(stmt.body) != 1 or not isinstance(stmt.body[0], cst.Assign) or \
            stmt.body[0].value is not call or ctx.parent(stmt) is not loop.body:
        return Decline(diag, "only `name = torch.compile(...)` directly in the loop body is hoisted")
    rebound = set()
    for node in walk(loop.body):
        if isinstance(node, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
            targets = node.targets if isinstance(node, cst.Assign) else [node]
            for t in targets:
                tgt = t.target
                rebound |= names_in(tgt) if isinstance(tgt, (cst.Name, cst.Tuple, cst.List)) else set()
    if isinstance(loop, cst.For):
        rebound |= names_in(loop.target)
    used = names_in(call)
    target_name = code(stmt.body[0].targets[0].target)
    if used & rebound:
        return Decline(diag, f"the compiled object depends on names rebound in the loop: {sorted(used & rebound)}")
    if sum(1 for n in walk(loop.body) if isinstance(n, cst.Assign)
           and any(code(t.target) == target_name for t in n.targets)) != 1:
        return Decline(diag, f"`{target_name}` is assigned more than once in the loop")
    hoisted = stmt.with_changes(leading_lines=list(loop.leading_lines))

    def prepend(upd):
        return cst.FlattenSentinel([hoisted, upd.with_changes(leading_lines=[])])

    return Plan(diag, "hoist `torch.compile` out of the loop (compile once)", "safe",
                [(stmt, cst.RemovalSentinel.REMOVE), (loop, prepend)])


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


@fixer("MND402")
def fix_varying_scalar(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
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
