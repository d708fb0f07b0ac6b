"""Sizes computed from a module's integer buffers (MND310/MND311): fold them to Python ints under compile.

Audio codecs (EnCodec, Mimi) keep a convolution's stride and kernel size as 0-d ``int64`` buffers built
from Python ints in ``__init__`` (``self.register_buffer("stride", torch.tensor(s, dtype=torch.int64),
persistent=False)``) and compute their padding from them with tensor arithmetic: the pads handed to
``F.pad`` are tensors, and Dynamo breaks on each (a data-dependent operator). The numbers are constants
of the module; only their tensor form hides them. The repair keeps every line eager runs and gives
compiled code the numbers:

* a method that computes from the buffers and only the shapes of its tensor arguments (EnCodec's
  ``_get_extra_padding_for_conv1d``) gets a compiled form at its top, ``if torch.compiler.is_compiling()
  and not _mend_fold.active:``. Where its arithmetic is integer arithmetic and ``ceil``/``floor`` of
  ``a / b + c`` (:class:`_IntegerForm`), that form computes it exactly in Python integers (also on
  symbolic sizes, with dynamic shapes) and runs only within the bounds that make it equal to torch's
  float arithmetic (else the original code runs). Otherwise it is ``return _mend_fold(Cls.method, self,
  x.shape)``: ``_mend_fold`` (a helper marked ``torch._dynamo.assume_constant_result``) runs the original
  method while Dynamo traces, on the real buffers and a stand-in carrying the shape, and hands the result
  on as a Python number (static shapes only: with dynamic shapes it breaks the graph, as the original did);
* a statement of another method that passes a buffer on as a number (``self._pad1d(x, (self.padding_total,
  extra))``) reads it, under compile, as ``_mend_fold(getattr, self, "padding_total")``.

Eager runs the original code, so eager results are unchanged. Compiled code computes with the very
operations of the original (they run in torch, while tracing), so the numbers are exact. **Unsafe**:
the numbers are read once, when Dynamo traces; a later in-place write to those buffers is not seen by
the compiled graph (the fix declines when the file writes them), and a method folded this way returns
a Python number instead of a 0-d tensor under compile (the fix declines when anything but the class
itself calls it).
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import BUFFER_NAMES, HELPERS_ACT_FROM, HELPERS_ACT_NOTE, SIZE_FIRST_FACTORIES
from mend.rewriter.analysis import code, eager_else, is_docstring, parse_expr, parse_stmt, self_attr, walk
from mend.rewriter.context import FileContext
from mend.rewriter.parts.sites import size_site
from mend.rewriter.plan import Decline, Example, Plan
from mend.rewriter.traversal import children

EXAMPLES = (
    Example(
        rule="MND310",
        before='''
            import torch
            from torch import nn


            class PaddedConv1d(nn.Module):
                """EnCodec's conv: stride and kernel size kept as 0-d int64 buffers, the padding computed from them."""

                def __init__(self):
                    super().__init__()
                    stride = torch.tensor(3, dtype=torch.int64)
                    kernel_size = torch.tensor(5, dtype=torch.int64)
                    self.register_buffer("stride", stride, persistent=False)
                    self.register_buffer("padding_total", kernel_size - stride, persistent=False)

                def forward(self, hidden_states):
                    padding_right = self.padding_total // 2
                    padding_left = self.padding_total - padding_right
                    return nn.functional.pad(hidden_states, (padding_left, padding_right), "reflect")
        ''',
        after='''
            import torch
            from torch import nn
            from _mend import fold as _mend_fold


            class PaddedConv1d(nn.Module):
                """EnCodec's conv: stride and kernel size kept as 0-d int64 buffers, the padding computed from them."""

                def __init__(self):
                    super().__init__()
                    stride = torch.tensor(3, dtype=torch.int64)
                    kernel_size = torch.tensor(5, dtype=torch.int64)
                    self.register_buffer("stride", stride, persistent=False)
                    self.register_buffer("padding_total", kernel_size - stride, persistent=False)

                def forward(self, hidden_states):
                    if not torch.compiler.is_compiling() or _mend_fold.active:
                        padding_right = self.padding_total // 2
                    else:
                        padding_right = _mend_fold(getattr, self, "padding_total") // 2
                    if not torch.compiler.is_compiling() or _mend_fold.active:
                        padding_left = self.padding_total - padding_right
                    else:
                        padding_left = _mend_fold(getattr, self, "padding_total") - padding_right
                    return nn.functional.pad(hidden_states, (padding_left, padding_right), "reflect")
        ''',
        run="compile(PaddedConv1d())(torch.arange(14.0).reshape(1, 2, 7))",
        unsafe=True,
    ),
)


_WHY = ("fold the module's integer buffers to Python numbers under compile (unsafe: they are read while "
        "Dynamo traces; a later in-place write to them is not seen by the compiled graph)" + HELPERS_ACT_NOTE)
_INT_DTYPES = {"torch.int64", "torch.long", "torch.int32", "torch.int"}
_SHAPE_USES = {"shape", "size", "dim", "ndim"}
# operators under which a buffer's number stays an exact integer (true division would round in float32)
_INT_OPS = (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide)


class _NoFold(Exception):
    """The class does not have the shape this repair proves; the message says why."""


def repair(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    site = size_site(ctx, diag)
    return site if isinstance(site, Decline) else int_buffer_plan(ctx, diag, site)


def int_buffer_plan(ctx: FileContext, diag: Diagnostic, node: cst.CSTNode) -> Plan | Decline | None:
    """The fold plan for the class around ``node``, a decline with the reason, or None (no integer buffers)."""
    cls = ctx.enclosing_class(node)
    if cls is None:
        return None
    init = _method(cls, "__init__")
    buffers = _int_buffers(init, ctx.imports.qualify) if init is not None else set()
    if not buffers or not _fed_by(_size_parts(node, ctx.imports.qualify), ctx.enclosing_function(node), cls,
                                   buffers):
        return None
    try:
        return _plan(ctx, diag, cls, buffers)
    except _NoFold as exc:
        return Decline(diag, f"the size comes from the integer buffers {', '.join(sorted(buffers))}, but {exc}")


def _plan(ctx: FileContext, diag: Diagnostic, cls: cst.ClassDef, buffers: set[str]) -> Plan | Decline:
    if any("_mend_fold" in code(m) for m in _methods(cls)):
        raise _NoFold("this class is already folded (a site left is not fed by them)")
    _check_no_writes(cls, buffers)
    torch, imports = ctx.torch_name()
    edits: list = []
    folded: set[str] = set()
    for method in _methods(cls):
        if method.name.value == "__init__" or not _reads(method, buffers):
            continue
        shapes = _shape_only_params(method, buffers)
        if shapes is not None and _called_by_class_only(ctx, cls, method.name.value):
            edits.append((method, _fold_method(torch, cls.name.value, method, shapes, buffers)))
            folded.add(method.name.value)
            continue
        edits += _fold_statements(torch, method, buffers)
    if not edits:
        raise _NoFold("no method computes a number from them only (each also reads other tensor data)")
    too_old = ctx.options.torch_before(HELPERS_ACT_FROM)
    if too_old:
        return Decline(diag, too_old)
    return Plan(diag, f"{_WHY}: {', '.join(sorted(buffers))}", "unsafe", edits, imports=imports,
                helpers=["_mend_fold"])


def _methods(cls: cst.ClassDef) -> list[cst.FunctionDef]:
    return [s for s in cls.body.body if isinstance(s, cst.FunctionDef)]


def _method(cls: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    return next((m for m in _methods(cls) if m.name.value == name), None)



def _int_buffers(init: cst.FunctionDef, qualify) -> set[str]:
    """Names of the module's 0-d integer tensors built in ``__init__`` from Python numbers: registered
    buffers (``register_buffer``, or ``nn.Buffer`` assigned to an attribute) and tensor attributes computed
    from them with ``+ - * //``."""
    local: set[str] = set()  # locals holding such a tensor
    found: set[str] = set()

    def built(e: cst.BaseExpression) -> bool:
        if isinstance(e, cst.Name):
            return e.value in local
        if self_attr(e) in found:
            return True
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, _INT_OPS):
            sides = [e.left, e.right]
            return any(built(s) for s in sides) and all(built(s) or isinstance(s, cst.Integer) for s in sides)
        if isinstance(e, cst.Call) and qualify(e.func) in BUFFER_NAMES and e.args and e.args[0].keyword is None:
            return built(e.args[0].value)  # ``self.stride = nn.Buffer(stride, persistent=False)`` (torch >= 2.5)
        if isinstance(e, cst.Call) and code(e.func) == "torch.tensor" and len(e.args) == 2 \
                and e.args[1].keyword is not None and e.args[1].keyword.value == "dtype":
            return code(e.args[1].value) in _INT_DTYPES and not isinstance(e.args[0].value, (cst.List, cst.Tuple))
        return False

    for stmt in init.body.body:
        if not isinstance(stmt, cst.SimpleStatementLine) or len(stmt.body) != 1:
            continue
        small = stmt.body[0]
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            target = small.targets[0].target
            if isinstance(target, cst.Name):
                (local.add if built(small.value) else local.discard)(target.value)
            elif self_attr(target) is not None and built(small.value):
                found.add(self_attr(target))
        elif isinstance(small, cst.Expr) and isinstance(small.value, cst.Call) \
                and code(small.value.func) == "self.register_buffer" and len(small.value.args) >= 2 \
                and isinstance(small.value.args[0].value, cst.SimpleString) and built(small.value.args[1].value):
            found.add(small.value.args[0].value.evaluated_value)
    return found


def _check_no_writes(cls: cst.ClassDef, buffers: set[str]) -> None:
    for method in _methods(cls):
        if method.name.value == "__init__":
            continue
        for n in walk(method):
            targets = []
            if isinstance(n, cst.Assign):
                targets = [t.target for t in n.targets]
            elif isinstance(n, (cst.AugAssign, cst.AnnAssign)):
                targets = [n.target]
            for t in targets:
                if self_attr(t) in buffers:
                    raise _NoFold(f"`{method.name.value}` assigns `self.{self_attr(t)}`")
            if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and self_attr(n.func.value) in buffers \
                    and n.func.attr.value.endswith("_"):
                raise _NoFold(f"`{method.name.value}` writes `self.{self_attr(n.func.value)}` in place")


def _fed_by(parts: list[cst.CSTNode], func: cst.FunctionDef | None, cls: cst.ClassDef, buffers: set[str]) -> bool:
    """A size part of the site reads the buffers, calls a method of the class that does, or names a local
    computed from those (through other locals too), or its function is called by such a method with the size
    (EnCodec's ``_pad1d`` gets the padding as arguments): else the size comes from elsewhere (a count of tensor
    data in the same ``forward``) and another repair may take it, or none."""
    if func is None:
        return True
    readers = [m for m in _methods(cls) if _reads(m, buffers)]
    names = {m.name.value for m in readers}

    def calls(body: cst.CSTNode, wanted: set[str]) -> list[cst.Call]:
        return [n for n in walk(body) if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute)
                and n.func.attr.value in wanted]

    def fed(m: cst.FunctionDef, expr: cst.CSTNode) -> bool:
        """``expr`` reads a buffer, calls a reader, or names a local of ``m`` computed from one of those."""
        assigns = [n for n in walk(m.body) if isinstance(n, cst.Assign)]
        local: set[str] = set()
        while True:
            more = {t.target.value for n in assigns for t in n.targets if isinstance(t.target, cst.Name)
                    and (_reads(n.value, buffers) or calls(n.value, names)
                         or any(isinstance(x, cst.Name) and x.value in local for x in walk(n.value)))}
            if more <= local:
                break
            local |= more
        return bool(_reads(expr, buffers)) or bool(calls(expr, names)) or any(
            isinstance(n, cst.Name) and n.value in local for n in walk(expr))

    return any(fed(func, part) for part in parts) or any(
        fed(m, c) for m in readers for c in calls(m.body, {func.name.value}))


def _size_parts(node: cst.CSTNode, qualify) -> list[cst.CSTNode]:
    """The parts of a size site that are sizes or bounds: a subscript's slice, a call's arguments but the
    tensor a torch function works on (``F.pad(x, (a, b))``: ``(a, b)``; a factory's first argument is a size)."""
    if isinstance(node, cst.Subscript):
        return list(node.slice)
    if not isinstance(node, cst.Call):
        return [node]
    args = list(node.args)
    name = qualify(node.func) or ""
    if name.startswith("torch.") and name.rsplit(".", 1)[-1] not in SIZE_FIRST_FACTORIES and args \
            and args[0].keyword is None:
        args = args[1:]
    return args


def _reads(node: cst.CSTNode, buffers: set[str]) -> list[cst.Attribute]:
    return [n for n in walk(node) if self_attr(n) in buffers]


def _shape_only_params(method: cst.FunctionDef, buffers: set[str]) -> list[str] | None:
    """The parameters (after ``self``) when the method is straight-line arithmetic on the buffers and the
    shapes of its arguments (each argument read only as ``x.shape``/``x.size()``), else None."""
    params = method.params
    if params.star_arg not in (None, cst.MaybeSentinel.DEFAULT) or params.kwonly_params or params.star_kwarg \
            or params.posonly_params or not params.params or params.params[0].name.value != "self":
        return None
    names = [p.name.value for p in params.params[1:]]
    if any(p.default is not None for p in params.params[1:]) or method.decorators:
        return None
    body = [s for s in method.body.body if not is_docstring(s)]
    if not body or not all(isinstance(s, cst.SimpleStatementLine) and len(s.body) == 1
                           and isinstance(s.body[0], (cst.Assign, cst.Return)) for s in body):
        return None
    if not isinstance(body[-1].body[0], cst.Return):
        return None
    for n in walk(method.body):
        if isinstance(n, cst.Name) and n.value in names:
            continue
        if isinstance(n, cst.Attribute) and isinstance(n.value, cst.Name) and n.value.value in names \
                and n.attr.value not in _SHAPE_USES:
            return None
        if isinstance(n, cst.Call) and not _pure_callee(n, buffers):
            return None
    for n in walk(method.body):  # every parameter read goes through a shape attribute
        if isinstance(n, cst.Name) and n.value in names and not _under_shape(method.body, n):
            return None
    return names


def _under_shape(root: cst.CSTNode, name: cst.Name) -> bool:
    for n in walk(root):
        if isinstance(n, cst.Attribute) and n.value is name:
            return n.attr.value in _SHAPE_USES
    return False


def _pure_callee(call: cst.Call, buffers: set[str]) -> bool:
    """torch functions and tensor methods that compute on their inputs (no self-method calls, no I/O)."""
    func = code(call.func)
    if func.startswith("torch.") and not func.startswith(("torch.nn", "torch.distributed", "torch.save")):
        return True
    if isinstance(call.func, cst.Attribute):
        meth = call.func.attr.value
        return meth in {"to", "long", "int", "float", "size", "dim", "clamp", "ceil", "floor"} \
            and not meth.endswith("_")
    return func in {"int", "max", "min", "abs"}



def _called_by_class_only(ctx: FileContext, cls: cst.ClassDef, name: str) -> bool:
    """Every call of ``.name(...)`` in the file is ``self.name(...)`` inside ``cls``."""
    for n in walk(ctx.module):
        if isinstance(n, cst.Attribute) and n.attr.value == name:
            if not (isinstance(n.value, cst.Name) and n.value.value == "self"):
                return False
            if not any(a is cls for a in ctx.ancestors(n)):
                return False
    return True


def _fold_method(torch: str, cls_name: str, method: cst.FunctionDef, shapes: list[str],
                 buffers: set[str]) -> cst.FunctionDef:
    args = ", ".join(["self", *(f"{p}.shape" for p in shapes)])
    exact = _IntegerForm(torch, set(shapes), buffers).method(method)
    if exact is not None:  # exact integer arithmetic: traces with dynamic shapes too
        guard = parse_stmt(f"if {torch}.compiler.is_compiling() and not _mend_fold.active:\n"
                           + "".join(f"    {line}\n" for line in exact))
    else:
        guard = parse_stmt(f"if {torch}.compiler.is_compiling() and not _mend_fold.active:\n"
                           f"    return _mend_fold({cls_name}.{method.name.value}, {args})\n")
    body = list(method.body.body)
    at = 1 if body and is_docstring(body[0]) else 0
    return method.with_changes(body=method.body.with_changes(body=[*body[:at], guard, *body[at:]]))


def _fold_statements(torch: str, method: cst.FunctionDef, buffers: set[str]) -> list:
    """``if not compiling: <statement> else: <statement reading the buffers as numbers>`` for each
    statement that passes a buffer on as a number (a tuple item, an argument, integer arithmetic); none
    when a statement of the method uses a buffer otherwise (as a tensor)."""
    lines = [s for s in walk(method.body) if isinstance(s, cst.SimpleStatementLine)]
    statements = [s for s in lines if _reads(s, buffers)]
    if not all(_number_use(s, r) for s in statements for r in _reads(s, buffers)):
        return []  # it computes with the buffers as tensors (on tensor data): left as it is
    numbers = {t.target.value for s in statements for r in _reads(s, buffers)  # locals that become numbers
               for sink in [_number_sink(s, r)] if isinstance(sink, cst.Assign) for t in sink.targets}
    for line in lines:
        for n in walk(line):
            if isinstance(n, cst.Name) and n.value in numbers and not _is_target(line, n) \
                    and not _number_use(line, n):
                raise _NoFold(f"`{n.value}`, computed from them in `{method.name.value}`, is used as a tensor")
    edits = []
    for stmt in statements:
        compiled = stmt.visit(_ReadAsNumber(buffers))
        # ``_mend_fold.active``: while the fold runs, and always on a torch that cannot fold (before 2.13)
        edits.append((stmt, eager_else(torch, [stmt], [compiled.with_changes(leading_lines=[])],
                                       unless="_mend_fold.active")))
    return edits


def _number_use(stmt: cst.CSTNode, read: cst.CSTNode) -> bool:
    """``read`` reaches a call argument or a plain assignment only through tuples and integer operators."""
    return _number_sink(stmt, read) is not None


def _number_sink(stmt: cst.CSTNode, read: cst.CSTNode) -> cst.Arg | cst.Assign | None:
    """Where ``read`` goes through tuples and integer operators: a call argument, an assignment to
    locals, or None (anything else)."""
    parents: dict[int, cst.CSTNode] = {}
    for n in walk(stmt):
        for child in children(n):
            parents[id(child)] = n
    cur: cst.CSTNode = read
    while True:
        up = parents.get(id(cur))
        if isinstance(up, cst.BinaryOperation) and isinstance(up.operator, _INT_OPS):
            cur = up
        elif isinstance(up, (cst.Element, cst.Tuple)):
            cur = up
        elif isinstance(up, cst.Arg) and up.value is cur:
            return up
        elif isinstance(up, cst.Assign) and up.value is cur:
            return up if all(isinstance(t.target, cst.Name) for t in up.targets) else None
        else:
            return None


def _is_target(stmt: cst.CSTNode, name: cst.Name) -> bool:
    return any(isinstance(n, cst.AssignTarget) and n.target is name for n in walk(stmt))


class _ReadAsNumber(cst.CSTTransformer):
    def __init__(self, buffers: set[str]) -> None:
        self.buffers = buffers

    def leave_Attribute(self, original_node: cst.Attribute, updated_node: cst.Attribute) -> cst.BaseExpression:
        name = self_attr(original_node)
        if name in self.buffers:
            return parse_expr(f'_mend_fold(getattr, self, "{name}")')
        return updated_node


# The float arithmetic of the integer form: ``a / b + c`` (integers) under ``ceil``/``floor``. torch
# computes it in the default dtype (float32): f32(f32(a) / f32(b)) + c rounded again. When |a| < 2**21,
# 0 < b < 2**21 and |c * b| < 2**22 every integer is exact in float32 and the two roundings move the
# value by less than its distance to the next integer (at least 1 / b), so ceil/floor equal the exact
# ``-((-(a + c * b)) // b)`` / ``(a + c * b) // b`` (float64 only rounds less). Outside those bounds, or
# for another default dtype, the original code runs.
_RATIO_BOUND = "abs({a}) < 2**21 and 0 < {b} < 2**21 and abs({c} * {b}) < 2**22"


class _IntegerForm:
    """A folded method's body in exact Python integer arithmetic (on ints or symbolic sizes), or None.

    Accepted: assignments to locals and one final ``return``; integers from ``x.shape[i]``, literals and
    the buffers (``_mend_fold(getattr, self, name)``) combined with ``+ - * //``; ``a / b (+|-) c`` of
    integers consumed by ``torch.ceil``/``torch.floor`` followed by ``.to(torch.int64)``/``.long()``."""

    def __init__(self, torch: str, shape_params: set[str], buffers: set[str]) -> None:
        self.torch = torch
        self.params = shape_params
        self.buffers = buffers
        self.ints: set[str] = set()  # locals holding integers
        self.ratios: dict[str, tuple[str, str, str]] = {}  # local -> (a, b, c) names of ``a / b + c``
        self.lines: list[str] = []
        self.depth = 0  # the ``if`` of each ratio's bounds nests what follows

    def _emit(self, *lines: str) -> None:
        self.lines += ["    " * (self.depth + 1) + line for line in lines]

    def method(self, method: cst.FunctionDef) -> list[str] | None:
        body = [st for st in method.body.body if not is_docstring(st)]
        try:
            for stmt in body[:-1]:
                small = stmt.body[0]
                if not (isinstance(small, cst.Assign) and len(small.targets) == 1
                        and isinstance(small.targets[0].target, cst.Name)):
                    return None
                self._assign(small.targets[0].target.value, small.value)
            ret = body[-1].body[0]
            if not isinstance(ret, cst.Return) or ret.value is None:
                return None
            value = self._int(ret.value)
        except _NoFold:
            return None
        dtype = f"{self.torch}.get_default_dtype() in ({self.torch}.float32, {self.torch}.float64)"
        return [f"if {dtype}:", *self.lines, "    " * self.depth + f"    return {value}"]

    def _assign(self, name: str, value: cst.BaseExpression) -> None:
        if name in self.params:
            raise _NoFold("a parameter is reassigned")
        ratio = self._ratio(value)
        if ratio is not None:
            n = len(self.ratios) + 1
            names = tuple(f"_mend_{part}{n}" for part in "abc")
            self._emit(*(f"{nm} = {expr}" for nm, expr in zip(names, ratio)))
            self._emit("if " + _RATIO_BOUND.format(a=names[0], b=names[1], c=names[2]) + ":")
            self.depth += 1  # what follows runs only within the bounds (no division by zero either)
            self.ratios[name] = names
            self.ints.discard(name)
            return
        self._emit(f"{name} = {self._int(value)}")
        self.ints.add(name)
        self.ratios.pop(name, None)

    def _ratio(self, e: cst.BaseExpression) -> tuple[str, str, str] | None:
        """``a / b``, ``a / b + c``, ``a / b - c`` of integers: (a, b, c)."""
        e = _bare(e)
        c = "0"
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, (cst.Add, cst.Subtract)) \
                and isinstance(_bare(e.left), cst.BinaryOperation) and isinstance(_bare(e.left).operator, cst.Divide):
            c = self._int(e.right)
            c = c if isinstance(e.operator, cst.Add) else f"-({c})"
            e = _bare(e.left)
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, cst.Divide):
            return self._int(e.left), self._int(e.right), c
        return None

    def _int(self, e: cst.BaseExpression) -> str:
        e = _bare(e)
        if isinstance(e, cst.Integer):
            return e.value
        if isinstance(e, cst.Name) and e.value in self.ints:
            return e.value
        if self_attr(e) in self.buffers:
            return f'_mend_fold(getattr, self, "{self_attr(e)}")'
        if isinstance(e, cst.Subscript) and isinstance(e.value, cst.Attribute) and e.value.attr.value == "shape" \
                and isinstance(e.value.value, cst.Name) and e.value.value.value in self.params:
            return code(e)
        if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Minus):
            return f"(-{self._int(e.expression)})"
        if isinstance(e, cst.BinaryOperation) and isinstance(e.operator, _INT_OPS):
            op = code(e.operator).strip()
            return f"({self._int(e.left)} {op} {self._int(e.right)})"
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and not e.args and e.func.attr.value == "long" \
                or isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value == "to" \
                and len(e.args) == 1 and code(e.args[0].value) in {"torch.int64", "torch.long"}:
            return self._rounded(e.func.value)
        raise _NoFold(f"`{code(e)}` is not integer arithmetic")

    def _rounded(self, e: cst.BaseExpression) -> str:
        """``torch.ceil(r)`` / ``torch.floor(r)`` of a ratio local, as an exact integer."""
        e = _bare(e)
        if isinstance(e, cst.Call) and code(e.func) in {"torch.ceil", "torch.floor"} and len(e.args) == 1 \
                and isinstance(e.args[0].value, cst.Name) and e.args[0].value.value in self.ratios:
            a, b, c = self.ratios[e.args[0].value.value]
            num = f"({a} + {c} * {b})"
            return f"(-((-{num}) // {b}))" if code(e.func) == "torch.ceil" else f"({num} // {b})"
        raise _NoFold(f"`{code(e)}` is not `torch.ceil`/`torch.floor` of `a / b + c`")


def _bare(e: cst.BaseExpression) -> cst.BaseExpression:
    return e.with_changes(lpar=[], rpar=[]) if getattr(e, "lpar", None) else e
