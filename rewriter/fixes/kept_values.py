"""Sizes read from a tensor built from Python numbers (MND310/MND311): keep a Python copy beside it.

Deformable-attention models build their feature maps' shapes as a Python list and turn it into a tensor
(``spatial_shapes = torch.as_tensor(shapes, dtype=torch.long)``), which they hand on through several calls;
the code that needs the numbers back iterates the tensor (``for level, (height, width) in
enumerate(spatial_shapes): torch.linspace(0.5, height - 0.5, height)``, ``value.split([h * w for h, w in
value_spatial_shapes])``) and Dynamo breaks on each 0-d tensor used as a size. The numbers were Python
numbers all along; only their tensor form hides them (upstream code now passes ``spatial_shapes_list``
beside the tensor by hand). The repair:

* where the tensor is built, ``_mend_keep_values(torch.as_tensor(shapes, ...), shapes)`` attaches a copy of
  the numbers to it (as nested tuples), only when the tensor is an ``int64`` tensor and every number is a
  Python ``int`` whose nesting matches the tensor's shape (checked when it runs; else nothing is kept);
* where the numbers are read, in the functions of the same file the tensor is passed to (by keyword, or by
  position to a function or method of the file), ``_mend_kept(spatial_shapes, 2)`` hands on that copy
  (tuples of Python ints) when the tensor has it, has the dimensions the reading code peels (2: rows
  unpacked into numbers) and, in eager, has not been written in place since; else the tensor itself, as
  before. Dynamo reads the copy as constants: no break.

Where the copy is read, the numbers are Python ``int`` instead of 0-d ``int64`` tensors of the same value.
The fix checks that every use of them is one where both act alike: a size or bound of a torch call or
tensor method, an index or slice, ``+ - * // %`` among them and with tensors, a comparison, a name that
sums them. **Unsafe**: ``height - 0.5`` is a Python float (float64) where the tensor form was float32, equal
below 2**24; under torch.compile the copy is read without the in-place check (Dynamo cannot read a tensor's
version), so a shape tensor changed in place after it was built is seen by eager but not by the compiled
graph.
"""

from __future__ import annotations

import re

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import KEEP_VALUES_HELPER, KEPT_VALUES_HELPER
from mend.rewriter.analysis import FunctionFacts, all_params, code, make_call, strip_parens, target_names, walk
from mend.rewriter.engine import Decline, FileContext, Plan

_WHY = ("keep a Python copy of the numbers a shape tensor is built from, and read the copy where the numbers "
        "are needed (unsafe: Python ints where 0-d int64 tensors were; float arithmetic on them is float64 "
        "instead of float32, equal below 2**24; a shape tensor changed in place is not seen under compile)")
_BUILDERS = {"torch.as_tensor", "torch.tensor"}
_BUILDER_TEXT = re.compile(r"\b(as_tensor|tensor)\(\s*\w+\s*,[^)]*dtype")
_INT_DTYPES = {"torch.long", "torch.int64"}
# operators under which a Python int and a 0-d int64 tensor give the same number
_SAME_OPS = (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo)


class _NoKeep(Exception):
    """A use of the numbers where a Python int and a 0-d tensor act differently (the message says which)."""


def kept_values_plan(ctx: FileContext, diag: Diagnostic, node: cst.CSTNode) -> Plan | Decline | None:
    """The plan keeping the numbers where the tensor ``node`` reads is built and reading them from the copy
    there and at every other read in the file, a decline, or None (no tensor built from Python numbers in
    this file reaches the site)."""
    if not _BUILDER_TEXT.search(ctx.source):
        return None  # no builder in the file (most files): no whole-file walk
    ctx.prepare_all()
    func = ctx.enclosing_function(node)
    reached = ctx.memo("kept_values.reached", lambda: _reached(ctx))
    if func is None or func not in reached:
        return None
    own = [s for s in _read_sites(ctx, ctx.statement_line(node) or node) if s[0].value in reached[func]]
    if not own:
        return None
    try:
        for _, _, users in own:
            _check_uses(ctx, func, users)
    except _NoKeep as why:
        return Decline(diag, f"the numbers come from a tensor built from Python numbers, but {why}")
    edits, shown = ctx.memo("kept_values.edits", lambda: _all_edits(ctx, reached))
    return Plan(diag, f"{_WHY}: {shown}", "unsafe", edits, helpers=[KEEP_VALUES_HELPER, KEPT_VALUES_HELPER])


def _all_edits(ctx: FileContext, reached: dict[cst.FunctionDef, set[str]]) -> tuple[list, str]:
    """The builders kept and every read of the file whose uses allow it (one repair for the file: the reads
    of one tensor are spread over the functions it is passed to, and some have no finding of their own)."""
    edits = [(call, _keep_call(call)) for call in _unkept_builders(ctx)]
    read: list[str] = []
    for func, names in reached.items():
        for root, depth, users in _sites_in(ctx, func, names):
            try:
                _check_uses(ctx, func, users)
            except _NoKeep:
                continue  # left as it was; its own finding says why
            edits.append((root, make_call(KEPT_VALUES_HELPER, root.deep_clone(), cst.Integer(str(depth)))))
            read.append(f"`{root.value}` in {func.name.value}()")
    return edits, ", ".join(dict.fromkeys(read))


def _sites_in(ctx: FileContext, func: cst.FunctionDef, names: set[str]) -> list[tuple[cst.Name, int, list]]:
    sites = []
    for n in walk(func.body):
        loop = n if isinstance(n, cst.For) else _comp_for(n)
        if loop is not None:
            unpacked = _unpacked(loop.target, loop.iter)
            if unpacked is not None and unpacked[0].value in names:
                sites.append(_loop_site(ctx, n, loop, *unpacked))
        elif isinstance(n, cst.Subscript) and not _inner_subscript(ctx, n):
            chain = _index_chain(n)
            if chain is not None and chain[0].value in names:
                sites.append(chain)
    return sites


def _inner_subscript(ctx: FileContext, sub: cst.Subscript) -> bool:
    parent = ctx.parent(sub)
    return isinstance(parent, cst.Subscript) and parent.value is sub


# --- where the tensors are built, and where they go ---------------------------------------------------

def _builders(ctx: FileContext) -> list[tuple[cst.FunctionDef, str, cst.Call]]:
    """``name = torch.as_tensor(values, dtype=torch.long, ...)`` (or already kept) in the file's functions:
    (function, name, the builder call)."""
    out = []
    for node in walk(ctx.module):
        if not (isinstance(node, cst.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0].target, cst.Name)):
            continue
        call = node.value
        if isinstance(call, cst.Call) and code(call.func) == KEEP_VALUES_HELPER and call.args:
            call = call.args[0].value
        if _is_builder(ctx, call) and (func := ctx.enclosing_function(node)) is not None:
            out.append((func, node.targets[0].target.value, call))
    return out


def _is_builder(ctx: FileContext, call: cst.BaseExpression) -> bool:
    if not (isinstance(call, cst.Call) and ctx.imports.qualify(call.func) in _BUILDERS and call.args):
        return False
    first = call.args[0]
    if first.keyword is not None or first.star or not isinstance(first.value, cst.Name):
        return False  # the values are read twice: a name only
    dtype = next((a.value for a in call.args if a.keyword is not None and a.keyword.value == "dtype"), None)
    return dtype is not None and ctx.imports.qualify(dtype) in _INT_DTYPES


def _unkept_builders(ctx: FileContext) -> list[cst.Call]:
    out = []
    for _, _, call in ctx.memo("kept_values.builders", lambda: _builders(ctx)):
        parent = ctx.parent(ctx.parent(call))  # Arg -> Call
        if not (isinstance(parent, cst.Call) and code(parent.func) == KEEP_VALUES_HELPER):
            out.append(call)
    return out


def _keep_call(call: cst.Call) -> cst.Call:
    return make_call(KEEP_VALUES_HELPER, call, call.args[0].value.deep_clone())


def _reached(ctx: FileContext) -> dict[cst.FunctionDef, set[str]]:
    """For each function of the file, the names that may hold a tensor built from Python numbers: the
    builders' names, and parameters they are passed to (by keyword to any function or method of the file
    with that parameter; by position to a function of the file, or to a method through ``self.``/``cls.``)."""
    functions = [n for n in walk(ctx.module) if isinstance(n, cst.FunctionDef)]
    reached: dict[cst.FunctionDef, set[str]] = {}
    for func, name, _ in ctx.memo("kept_values.builders", lambda: _builders(ctx)):
        reached.setdefault(func, set()).add(name)
    work = list(reached)
    while work:
        func = work.pop()
        for callee, param in _passed_to(ctx, functions, func, reached[func]):
            if param not in reached.setdefault(callee, set()):
                reached[callee].add(param)
                work.append(callee)
    return reached


def _passed_to(ctx: FileContext, functions: list[cst.FunctionDef], func: cst.FunctionDef,
               names: set[str]) -> list[tuple[cst.FunctionDef, str]]:
    out = []
    for call in walk(func.body):
        if not isinstance(call, cst.Call):
            continue
        for i, arg in enumerate(call.args):
            if not (isinstance(arg.value, cst.Name) and arg.value.value in names) or arg.star:
                continue
            if arg.keyword is not None:
                out += [(f, arg.keyword.value) for f in functions
                        if arg.keyword.value in {p.name.value for p in all_params(f.params)}]
            elif all(a.keyword is None and not a.star for a in call.args[:i]):
                out += [(f, p) for f, p in _positional(ctx, functions, call, i)]
    return out


def _positional(ctx: FileContext, functions: list[cst.FunctionDef], call: cst.Call,
                i: int) -> list[tuple[cst.FunctionDef, str]]:
    func = call.func
    if isinstance(func, cst.Name):
        targets = [f for f in functions if f.name.value == func.value and ctx.enclosing_class(f) is None]
        shift = 0
    elif isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value in ("self", "cls"):
        targets = [f for f in functions if f.name.value == func.attr.value and ctx.enclosing_class(f) is not None]
        shift = None
    else:
        return []
    out = []
    for f in targets:
        params = list(f.params.posonly_params) + list(f.params.params)
        static = any(code(d.decorator) == "staticmethod" for d in f.decorators)
        k = i + (0 if shift == 0 or static else 1)
        if k < len(params):
            out.append((f, params[k].name.value))
    return out


# --- where the numbers are read ---------------------------------------------------------------------

def _read_sites(ctx: FileContext, node: cst.CSTNode) -> list[tuple[cst.Name, int, list[cst.BaseExpression]]]:
    """Each tensor whose numbers ``node`` reads: (its name where the numbers are taken, the dimensions the
    reading peels, the expressions that become Python numbers)."""
    sites: dict[int, tuple] = {}
    for n in walk(node):
        if isinstance(n, cst.Subscript):
            chain = _index_chain(n)
            if chain is not None and id(chain[0]) not in sites:
                sites[id(chain[0])] = chain
        elif isinstance(n, cst.Name):
            loop = _binding_loop(ctx, n)
            if loop is not None and id(loop[0]) not in sites:
                sites[id(loop[0])] = loop
    return list(sites.values())


def _index_chain(sub: cst.Subscript) -> tuple[cst.Name, int, list] | None:
    """``shapes[i][0]``: one plain index per level down to a name (outermost subscript only)."""
    depth, cur = 0, sub
    while isinstance(cur, cst.Subscript):
        if len(cur.slice) != 1 or not _plain_index(cur.slice[0].slice):
            return None
        depth, cur = depth + 1, cur.value
    return (cur, depth, [sub]) if isinstance(cur, cst.Name) else None


def _plain_index(index: cst.BaseSlice) -> bool:
    """One integer position (a number, a name, arithmetic): a tuple takes it as the tensor does."""
    if not isinstance(index, cst.Index) or index.star is not None:
        return False
    value = strip_parens(index.value)
    return not (isinstance(value, (cst.Ellipsis, cst.Tuple, cst.List, cst.Comparison))
                or (isinstance(value, cst.Name) and value.value in ("None", "True", "False")))


def _binding_loop(ctx: FileContext, name: cst.Name) -> tuple[cst.Name, int, list] | None:
    """The ``for`` (or comprehension) around ``name`` that binds it by iterating a tensor name: ``for h, w
    in shapes``, ``for level, (h, w) in enumerate(shapes)``."""
    for anc in ctx.ancestors(name):
        if isinstance(anc, cst.FunctionDef):
            return None
        loop = anc if isinstance(anc, cst.For) else _comp_for(anc)
        if loop is None:
            continue
        unpacked = _unpacked(loop.target, loop.iter)
        if unpacked is not None and name.value in target_names(unpacked[1]):
            return _loop_site(ctx, anc, loop, *unpacked)
    return None


def _loop_site(ctx: FileContext, node: cst.CSTNode, loop: cst.For | cst.CompFor, root: cst.Name,
               target: cst.CSTNode) -> tuple[cst.Name, int, list]:
    """(the iterated name, the dimensions the loop peels, the loop variables' reads)."""
    depth = 1 + (1 if isinstance(target, (cst.Tuple, cst.List)) else 0)
    scope = loop.body if isinstance(loop, cst.For) else node
    bound = set(target_names(target))
    users = [n for n in walk(scope) if isinstance(n, cst.Name) and n.value in bound and not _is_target(ctx, n, target)
             and _is_load(ctx, n)]
    return root, depth, users


def _comp_for(node: cst.CSTNode) -> cst.CompFor | None:
    if isinstance(node, (cst.ListComp, cst.SetComp, cst.GeneratorExp, cst.DictComp)) \
            and node.for_in.inner_for_in is None:
        return node.for_in
    return None


def _unpacked(target: cst.BaseExpression, it: cst.BaseExpression) -> tuple[cst.Name, cst.CSTNode] | None:
    it = strip_parens(it)
    if isinstance(it, cst.Name):
        return it, target
    if isinstance(it, cst.Call) and code(it.func) == "enumerate" and len(it.args) == 1 \
            and isinstance(it.args[0].value, cst.Name) and isinstance(target, cst.Tuple) \
            and len(target.elements) == 2:
        return it.args[0].value, target.elements[1].value
    return None


def _is_target(ctx: FileContext, name: cst.Name, target: cst.CSTNode) -> bool:
    return any(anc is target for anc in ctx.ancestors(name)) or name is target


# --- the uses of the numbers ---------------------------------------------------------------------------

def _check_uses(ctx: FileContext, func: cst.FunctionDef, users: list[cst.BaseExpression]) -> None:
    """Raise :class:`_NoKeep` unless each expression holding a number is used where a Python int and a 0-d
    int64 tensor act alike."""
    seen: set[str] = set()
    work = list(users)
    while work:
        expr = work.pop()
        sink = _sink(ctx, ctx.facts(func), expr)
        if isinstance(sink, str):  # a name that sums the numbers: its reads must be alike too
            if sink not in seen:
                seen.add(sink)
                work += [n for n in walk(func.body) if isinstance(n, cst.Name) and n.value == sink
                         and _is_load(ctx, n)]


def _sink(ctx: FileContext, facts: FunctionFacts, expr: cst.BaseExpression) -> str | None:
    """Climb from ``expr`` (a number) to where its value ends; a name it is stored to, or None."""
    cur = expr
    while True:
        parent = ctx.parent(cur)
        if isinstance(parent, cst.BinaryOperation):
            other = parent.right if parent.left is cur else parent.left
            if _is_tensor(facts, other):
                return None  # a tensor op: an int and a 0-d int64 tensor promote alike
            if not isinstance(parent.operator, _SAME_OPS):
                raise _NoKeep(f"`{code(parent)}` divides or raises it to a power (float64 in Python, "
                              "float32 on the tensor)")
        elif isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Minus):
            pass
        elif isinstance(parent, (cst.Index, cst.Slice)):
            return None  # an index or a slice bound takes either alike
        elif isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
            _check_truth(ctx, parent if isinstance(parent, cst.Comparison) else ctx.parent(parent))
            return None
        elif isinstance(parent, cst.Subscript) and parent.value is cur:
            pass  # ``shapes[i]`` further indexed: the outer subscript is the number
        elif isinstance(parent, (cst.Element, cst.List, cst.Tuple, cst.ListComp, cst.GeneratorExp)):
            pass  # inside a list of sizes: its use decides
        elif isinstance(parent, cst.Arg):
            call = ctx.parent(parent)
            if isinstance(call, cst.Call) and _sizes_call(ctx, call):
                return None
            raise _NoKeep(f"`{code(call)}` may treat it as a tensor")
        elif isinstance(parent, (cst.AugAssign, cst.Assign)) and parent.value is cur:
            targets = [parent.target] if isinstance(parent, cst.AugAssign) else [t.target for t in parent.targets]
            if len(targets) == 1 and isinstance(targets[0], cst.Name):
                return targets[0].value
            raise _NoKeep(f"it is stored to `{code(targets[0])}`")
        elif isinstance(parent, (cst.AssignTarget, cst.For, cst.CompFor)):
            return None
        else:
            raise _NoKeep(f"`{code(parent)[:60]}` uses it as a tensor")
        cur = parent


def _is_tensor(facts: FunctionFacts, expr: cst.BaseExpression) -> bool:
    """A tensor, or indexed as only an array is (``x[:, None, i]``, ``x[None]``)."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.Subscript):
        parts = [e.slice for e in expr.slice]
        if len(parts) > 1 or any(not isinstance(p, cst.Index) or isinstance(p.value, cst.Ellipsis)
                                 or code(p.value) == "None" for p in parts):
            return True
    return facts.is_tensor(expr)


def _check_truth(ctx: FileContext, test: cst.CSTNode) -> None:
    """A comparison of the numbers is a Python bool where it was a bool tensor: alike only as a test."""
    cur = test
    while isinstance(parent := ctx.parent(cur), (cst.BooleanOperation, cst.UnaryOperation)):
        cur = parent
    if not (isinstance(parent, (cst.If, cst.While, cst.IfExp, cst.Assert)) and parent.test is cur):
        raise _NoKeep(f"the comparison `{code(test)}` is used as a value, not a test")


def _sizes_call(ctx: FileContext, call: cst.Call) -> bool:
    """A torch function or a tensor method (``x.view(...)``): they take a Python int where a 0-d tensor was."""
    qual = ctx.imports.qualify(call.func) or ""
    if qual.startswith("torch.") or code(call.func) in ("range", "int", "float"):
        return True
    return isinstance(call.func, cst.Attribute) and not (ctx.imports.qualify(call.func.value) or "").startswith(
        ("math", "numpy", "builtins")) and code(call.func.value) not in ("self", "cls")


def _is_load(ctx: FileContext, name: cst.Name) -> bool:
    parent = ctx.parent(name)
    if isinstance(parent, cst.AssignTarget) or (isinstance(parent, cst.AugAssign) and parent.target is name):
        return False
    if isinstance(parent, cst.Attribute) and parent.attr is name:
        return False
    return not (isinstance(parent, cst.Arg) and parent.keyword is name)
