"""Syntax-tree facts the fixes need to prove their safety conditions (no torch import).

Everything here is a conservative must-analysis over one file: a question answers ``True`` only when
the tree proves it (a value is a tensor, an expression has no side effects, a name is not read after a
statement); anything unproven answers ``False`` and the fix that asked declines. What is known about
torch itself (which calls return tensors, which ops are total, elementwise or shape-changing) comes from
:mod:`mend.analyzers.static.torch_facts`, which ``mend check`` reads too.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import libcst as cst
from libcst.metadata import CodeRange

from mend.analyzers.static.torch_facts import (
    DATA_BOOL_TORCH,
    DATA_METHODS,
    EFFECT_METHODS,
    EFFECTFUL_NAMESPACES,
    EFFECTFUL_TORCH,
    FLOAT_DTYPES,
    FLOATING_ONLY,
    GRAD_SAFE_OPS,
    NON_TENSOR_METHODS,
    NON_TENSOR_MODULES,
    SHAPE_CHANGING,
    TENSOR_ATTRS,
    TENSOR_METHODS,
    TENSOR_TUPLE_METHODS,
    TENSOR_TUPLE_TORCH,
    TORCH_ONLY_METHODS,
    TOTAL_ELEMENTWISE,
    TOTAL_REDUCTIONS,
    TRANSPOSES,
    from_import_binding,
    import_binding,
    is_random_op,
    qualified,
    returns_tensor,
)
from mend.rewriter.traversal import children, walk

_EMPTY = cst.Module(body=[])

# Pure builtins (no effects, deterministic).
PURE_BUILTINS = {"len", "min", "max", "any", "all", "abs", "float", "int", "bool", "tuple", "isinstance", "round", "range"}
# Reads of a dict (never tensors; no effects).
CONTAINER_READS = frozenset({"keys", "values", "items"})


def code(node: cst.CSTNode) -> str:
    """Source text of ``node`` (as it would be printed in a module)."""
    return _EMPTY.code_for_node(node)


def self_attr(node: cst.CSTNode) -> str | None:
    """``name`` for ``self.name``, else None."""
    if isinstance(node, cst.Attribute) and isinstance(node.value, cst.Name) and node.value.value == "self":
        return node.attr.value
    return None


def is_docstring(stmt: cst.CSTNode) -> bool:
    """``stmt`` is a string literal alone on its line (a docstring where it opens a body)."""
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Expr) \
        and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString))


def dotted(expr: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    if isinstance(expr, cst.Name):
        return expr.value
    if isinstance(expr, cst.Attribute):
        head = dotted(expr.value)
        return f"{head}.{expr.attr.value}" if head else None
    return None


def parse_expr(text: str) -> cst.BaseExpression:
    return cst.parse_expression(text)


def parse_stmt(text: str) -> cst.BaseStatement:
    return cst.parse_statement(text)


def eager_else(torch: str, eager: Sequence[cst.BaseStatement], compiled: Sequence[cst.BaseStatement] | None = None,
               *, grad_gate: bool = False, prefix: str = "", unless: str = "") -> cst.If:
    """``if not torch.compiler.is_compiling(): <eager> [else: <compiled>]``, to stand where ``eager`` stood:
    the shape of every repair that keeps the original code for eager. The first statement's leading lines
    (its comments) move to the ``if``. ``grad_gate``: the original also runs with gradients on (``... or
    torch.is_grad_enabled()``); ``unless``: a test under which the original runs under compile too (``... or
    _mend_fold.active``); ``prefix``: a static test the compiled part still runs under (``elif``)."""
    first, *rest = eager
    test = f"not {torch}.compiler.is_compiling()" + (f" or {torch}.is_grad_enabled()" if grad_gate else "") \
        + (f" or {unless}" if unless else "")
    orelse = None
    if compiled is not None:
        block = cst.IndentedBlock(body=list(compiled))
        orelse = cst.If(test=parse_expr(prefix), body=block) if prefix else cst.Else(body=block)
    return cst.If(test=parse_expr(test), body=cst.IndentedBlock(body=[first.with_changes(leading_lines=[]), *rest]),
                  orelse=orelse, leading_lines=first.leading_lines)


def _import_nodes(body: Sequence[cst.CSTNode], typing_only: bool = True) -> Iterator[cst.CSTNode]:
    """Import statements at module level, also inside top-level if/try blocks (fallbacks, and ``if
    TYPE_CHECKING:`` unless ``typing_only`` is False: those bind nothing when the module runs)."""
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            yield from (s for s in stmt.body if isinstance(s, (cst.Import, cst.ImportFrom)))
        elif isinstance(stmt, cst.If) and not typing_only and code(stmt.test).endswith("TYPE_CHECKING"):
            continue
        elif isinstance(stmt, (cst.If, cst.Try)):
            blocks = [stmt.body]
            if isinstance(stmt, cst.If) and stmt.orelse is not None:
                blocks.append(stmt.orelse.body if isinstance(stmt.orelse, cst.Else) else cst.IndentedBlock([stmt.orelse]))
            if isinstance(stmt, cst.Try):
                blocks += [h.body for h in stmt.handlers]
            for block in blocks:
                if isinstance(block, cst.IndentedBlock):
                    yield from _import_nodes(block.body, typing_only)


def _asname(alias: cst.ImportAlias) -> str | None:
    return alias.asname.name.value if alias.asname is not None and isinstance(alias.asname.name, cst.Name) else None


def _bindings(nodes: Iterator[cst.CSTNode]) -> dict[str, str]:
    names: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, cst.Import):
            pairs = [import_binding(dotted(alias.name) or "", _asname(alias)) for alias in node.names]
        elif isinstance(node, cst.ImportFrom) and not node.relative and node.module is not None \
                and not isinstance(node.names, cst.ImportStar):
            base = dotted(node.module) or ""
            pairs = [from_import_binding(base, dotted(alias.name) or "", _asname(alias)) for alias in node.names]
        else:
            continue  # relative imports: the module's own name is not known here
        names.update(pairs)
    return names


def relative_import(module: cst.Module, name: str) -> tuple[int, str, str] | None:
    """For ``from ..pkg.mod import orig as name`` at the top of ``module``: (2, "pkg.mod", "orig"), else None."""
    for node in _import_nodes(module.body):
        if not (isinstance(node, cst.ImportFrom) and node.relative and node.module is not None
                and not isinstance(node.names, cst.ImportStar)):
            continue
        for alias in node.names:
            if isinstance(alias.name, cst.Name) and (_asname(alias) or alias.name.value) == name:
                return len(node.relative), dotted(node.module) or "", alias.name.value
    return None


class ImportMap:
    """Local name -> qualified module path, from a module's top-level imports (``names``, for reading
    the code; ``runtime``: those bound when the module runs, without ``if TYPE_CHECKING:`` ones)."""

    def __init__(self, module: cst.Module) -> None:
        self.names = _bindings(_import_nodes(module.body))
        self.runtime = _bindings(_import_nodes(module.body, typing_only=False))

    def qualify(self, expr: cst.BaseExpression) -> str | None:
        """Qualified dotted name of a Name/Attribute chain (``F.relu`` -> ``torch.nn.functional.relu``);
        a chain whose head is not imported is returned as written."""
        text = dotted(expr)
        if text is None:
            return None
        head, _, rest = text.partition(".")
        if head in self.names:
            return qualified(self.names[head], [rest] if rest else [])
        return text

    def local_name_for(self, target: str) -> str | None:
        """A local spelling that resolves to ``target`` (``torch`` -> ``torch``), if imported where the
        module runs (code mend writes uses it)."""
        for local, full in self.runtime.items():
            if full == target:
                return local
        return None




def contains(outer: CodeRange, inner: CodeRange) -> bool:
    return (outer.start.line, outer.start.column) <= (inner.start.line, inner.start.column) and (
        inner.end.line,
        inner.end.column,
    ) <= (outer.end.line, outer.end.column)


def range_contains_pos(rng: CodeRange, line: int, col0: int) -> bool:
    return (rng.start.line, rng.start.column) <= (line, col0) < (rng.end.line, rng.end.column) or (
        rng.start.line == line and rng.start.column == col0
    )


def is_literal(expr: cst.BaseExpression) -> bool:
    return isinstance(
        expr,
        (cst.Integer, cst.Float, cst.Imaginary, cst.SimpleString, cst.ConcatenatedString,
         cst.FormattedString),
    ) or (isinstance(expr, cst.Name) and expr.value in {"True", "False", "None"}) or (
        isinstance(expr, cst.UnaryOperation)
        and isinstance(expr.operator, (cst.Minus, cst.Plus))
        and isinstance(expr.expression, (cst.Integer, cst.Float))
    )


def is_number(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, (cst.Integer, cst.Float)):
        return True
    return isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, (cst.Minus, cst.Plus)) and \
        isinstance(expr.expression, (cst.Integer, cst.Float))


def is_container_or_none(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, (cst.List, cst.Tuple, cst.Dict, cst.Set, cst.SimpleString,
                             cst.ConcatenatedString, cst.FormattedString)) or (
        isinstance(expr, cst.Name) and expr.value == "None"
    )


class FunctionFacts:
    """Per-function facts: parameters, tensor-valued names, stores and loads of each name."""

    def __init__(self, func: cst.FunctionDef | None, imports: ImportMap,
                 module_attrs: set[str] | None = None) -> None:
        self.func = func
        self.imports = imports
        self.module_attrs = module_attrs or set()
        self.params: set[str] = set()
        self.tensor_names: set[str] = set()
        self.stores: dict[str, list[cst.CSTNode]] = {}
        self.loads: dict[str, list[cst.Name]] = {}
        if func is None:
            return
        annotated: set[str] = set()
        for p in _all_params(func.params):
            self.params.add(p.name.value)
            if p.annotation is not None:
                ann = imports.qualify(p.annotation.annotation) or ""
                if ann.endswith("Tensor") or ann in {"torch.Tensor"}:
                    annotated.add(p.name.value)
        self.tensor_names |= annotated
        self._collect(func.body)
        self.tensor_names |= {p for p in self.params - annotated if self._tensor_by_use(p)}
        # Names whose every store is a tensor-valued expression are tensors (two passes for chains).
        for _ in range(3):
            for name, values in self._store_values.items():
                if name in self.params and name not in annotated:
                    continue
                if values and all(v is not None and self.is_tensor(v) for v in values):
                    self.tensor_names.add(name)

    def _tensor_by_use(self, param: str) -> bool:
        """``param`` holds a tensor: a method only tensors have is called on it (``lengths.long()``,
        ``lengths.sum(dim=1)``: NumPy says ``axis=``), and every value bound to it again is a tensor when it
        is one (``x = x.contiguous()``)."""
        self.tensor_names.add(param)
        rebound = all(v is not None and self.is_tensor(v) for v in self._store_values.get(param, ()))
        self.tensor_names.discard(param)
        if not rebound:
            return False
        for name in self.loads.get(param, ()):
            call = self._receivers.get(id(name))
            if call is not None and (call.func.attr.value in TORCH_ONLY_METHODS or (
                    call.func.attr.value in TENSOR_METHODS
                    and any(a.keyword is not None and a.keyword.value == "dim" for a in call.args))):
                return True
        return False

    def _collect(self, body: cst.CSTNode) -> None:
        self._collect_stores(body)
        self._collect_loads(body)

    def _collect_stores(self, body: cst.CSTNode) -> None:
        """Every binding of a name in ``body``, with the value bound when it is known."""
        self._store_values: dict[str, list[cst.BaseExpression | None]] = {}
        for node in walk(body):
            if isinstance(node, cst.Assign):
                for t in node.targets:
                    unpacked = self._tensor_tuple(node.value) if isinstance(t.target, (cst.Tuple, cst.List)) else None
                    for name in _target_names(t.target):
                        value = node.value if isinstance(t.target, cst.Name) else unpacked
                        self._store_values.setdefault(name, []).append(value)
                        self.stores.setdefault(name, []).append(node)
            elif isinstance(node, (cst.AugAssign, cst.AnnAssign)):
                for name in _target_names(node.target):
                    if isinstance(node, cst.AnnAssign):  # `t *= m` keeps a tensor a tensor: no new value
                        self._store_values.setdefault(name, []).append(node.value)
                    self.stores.setdefault(name, []).append(node)
            elif isinstance(node, (cst.For, cst.CompFor)):
                for name in _target_names(node.target):
                    self._store_values.setdefault(name, []).append(None)
                    self.stores.setdefault(name, []).append(node)
            elif isinstance(node, cst.NamedExpr):
                for name in _target_names(node.target):
                    self._store_values.setdefault(name, []).append(None)
            elif isinstance(node, cst.WithItem) and node.asname is not None:
                for name in _target_names(node.asname.name):
                    self._store_values.setdefault(name, []).append(None)

    def _tensor_tuple(self, value: cst.BaseExpression) -> cst.BaseExpression | None:
        """``value`` when unpacking it gives tensors only (``torch.sort(x)``, ``t.topk(k)``: the call, whose
        tensor-ness the names then share); else None."""
        if not isinstance(value, cst.Call):
            return None
        if self.imports.qualify(value.func) in TENSOR_TUPLE_TORCH:
            return value
        func = value.func
        root = func.value if isinstance(func, cst.Attribute) else None
        while isinstance(root, cst.Attribute):
            root = root.value
        if isinstance(func, cst.Attribute) and func.attr.value in TENSOR_TUPLE_METHODS \
                and not (isinstance(root, cst.Name) and root.value in self.imports.names):
            return func.value  # a tensor's method (not `np.sort`): the names are tensors where the receiver is one
        return None

    def _collect_loads(self, body: cst.CSTNode) -> None:
        """Every read of a name in ``body`` (names in binding targets, attributes and keywords are not)."""
        stored: set[int] = set()
        for node in walk(body):
            target = None
            if isinstance(node, cst.AssignTarget):
                target = node.target
            elif isinstance(node, (cst.AugAssign, cst.AnnAssign, cst.For, cst.CompFor, cst.NamedExpr)):
                target = node.target
            elif isinstance(node, cst.AsName):
                target = node.name
            if target is not None:
                stored |= {id(n) for n in _target_name_nodes(target)}
        self._receivers: dict[int, cst.Call] = {}  # ``name.method(...)``: id of the name -> the call
        for node in walk(body):
            for child in children(node):
                if isinstance(child, cst.Name) and not _is_attr_or_keyword(node, child) and id(child) not in stored:
                    self.loads.setdefault(child.value, []).append(child)
            if isinstance(node, cst.Call) and isinstance(node.func, cst.Attribute) \
                    and isinstance(node.func.value, cst.Name):
                self._receivers[id(node.func.value)] = node

    # --- tensor-ness -------------------------------------------------------------------------
    def is_tensor(self, expr: cst.BaseExpression) -> bool:
        if isinstance(expr, cst.Name):
            return expr.value in self.tensor_names
        if isinstance(expr, cst.Call):
            return self._call_is_tensor(expr)
        if isinstance(expr, cst.Attribute):
            if expr.attr.value in TENSOR_ATTRS:
                return self.is_tensor(expr.value)
            return False
        if isinstance(expr, cst.Subscript):
            if isinstance(expr.value, cst.Attribute) and expr.value.attr.value in {"shape", "stride"}:
                return False
            return self.is_tensor(expr.value)
        if isinstance(expr, cst.BinaryOperation):
            return self.is_tensor(expr.left) or self.is_tensor(expr.right)
        if isinstance(expr, cst.UnaryOperation):
            return not isinstance(expr.operator, cst.Not) and self.is_tensor(expr.expression)
        if isinstance(expr, cst.Comparison):
            if any(isinstance(c.operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn)) for c in expr.comparisons):
                return False
            return self.is_tensor(expr.left) or any(self.is_tensor(c.comparator) for c in expr.comparisons)
        return False

    def _call_is_tensor(self, call: cst.Call) -> bool:
        """A torch op that returns a tensor, a submodule call, or a tensor method on a tensor."""
        qual = self.imports.qualify(call.func)
        if qual is not None and qual.startswith("torch."):
            return returns_tensor(qual)
        func = call.func
        if not isinstance(func, cst.Attribute):
            return False
        if isinstance(func.value, cst.Name) and func.value.value == "self" and func.attr.value in self.module_attrs:
            return True
        meth = func.attr.value
        return meth not in NON_TENSOR_METHODS and meth not in CONTAINER_READS and self.is_tensor(func.value)

    def reads_data(self, expr: cst.BaseExpression) -> bool:
        """True when ``expr`` (a condition operand) depends on tensor data, as far as the tree shows."""
        if self.is_tensor(expr):
            return True
        if isinstance(expr, cst.Name):
            return expr.value in self.tensor_names
        if isinstance(expr, cst.Call):
            if isinstance(expr.func, cst.Attribute) and expr.func.attr.value in DATA_METHODS:
                return True
            if isinstance(expr.func, cst.Name) and expr.func.value in ("any", "all") and len(expr.args) == 1 \
                    and expr.func.value not in self.stores:
                return self.reads_data(expr.args[0].value)  # ``any(t)``: the truth of each of its numbers
            qual = self.imports.qualify(expr.func) or ""
            return qual in DATA_BOOL_TORCH
        if isinstance(expr, cst.Comparison):
            if all(isinstance(c.operator, (cst.Is, cst.IsNot)) for c in expr.comparisons):
                return False  # `mask is not None`: identity, never the data
            return self.reads_data(expr.left) or any(self.reads_data(c.comparator) for c in expr.comparisons)
        if isinstance(expr, cst.BooleanOperation):
            return self.reads_data(expr.left) or self.reads_data(expr.right)
        if isinstance(expr, cst.UnaryOperation):
            return self.reads_data(expr.expression)
        if isinstance(expr, cst.BinaryOperation):
            return self.reads_data(expr.left) or self.reads_data(expr.right)
        return False

    # --- effects -----------------------------------------------------------------------------
    def is_pure(self, expr: cst.CSTNode) -> bool:
        """No calls except known-pure torch functions, tensor methods and builtins; no effects."""
        for node in walk(expr):
            if isinstance(node, (cst.Yield, cst.Await, cst.NamedExpr, cst.Lambda)):
                return False
            if isinstance(node, cst.Call):
                if not self.pure_call(node):
                    return False
        return True

    def pure_call(self, call: cst.Call) -> bool:
        qual = self.imports.qualify(call.func)
        if isinstance(call.func, cst.Name):
            return call.func.value in PURE_BUILTINS and call.func.value not in self.stores
        if qual is not None and qual.startswith("torch."):
            last = qual.rsplit(".", 1)[-1]
            if _in_place(last):
                return False
            return qual not in EFFECTFUL_TORCH and not qual.startswith(EFFECTFUL_NAMESPACES) and not is_random_op(last)
        if isinstance(call.func, cst.Attribute):
            meth = call.func.attr.value
            if meth in EFFECT_METHODS or _in_place(meth):
                return False
            if meth in TENSOR_METHODS or meth in NON_TENSOR_METHODS or meth in CONTAINER_READS:
                return True
        return False

    def is_grad_safe(self, expr: cst.BaseExpression) -> bool:
        """Every op has a bounded derivative (see GRAD_SAFE_OPS); arithmetic only + and -."""
        if isinstance(expr, (cst.Name, cst.Attribute)) or is_literal(expr):
            return True
        if isinstance(expr, cst.UnaryOperation):
            return isinstance(expr.operator, (cst.Minus, cst.Plus)) and self.is_grad_safe(expr.expression)
        if isinstance(expr, cst.BinaryOperation):
            if isinstance(expr.operator, (cst.Add, cst.Subtract)):
                return self.is_grad_safe(expr.left) and self.is_grad_safe(expr.right)
            if isinstance(expr.operator, cst.Multiply):
                return (is_number(expr.left) and self.is_grad_safe(expr.right)) or (
                    is_number(expr.right) and self.is_grad_safe(expr.left)
                )
            return False
        if isinstance(expr, cst.Call):
            name = expr.func.attr.value if isinstance(expr.func, cst.Attribute) else (
                expr.func.value if isinstance(expr.func, cst.Name) else None
            )
            if name not in GRAD_SAFE_OPS:
                return False
            if isinstance(expr.func, cst.Attribute) and not self.is_grad_safe(expr.func.value):
                return False
            return all(self.is_grad_safe(a.value) or not self.is_tensor(a.value) for a in expr.args)
        return False


    # --- speculation ----------------------------------------------------------------------------
    def is_python_number(self, expr: cst.BaseExpression) -> bool:
        """``expr`` is provably a Python number (never a tensor): literals, ``.shape[i]``/``.size(i)``/
        ``.dim()``/``len()``, ``torch.finfo(...).max``-style attributes, and arithmetic over them."""
        expr = _strip_parens(expr)
        if is_number(expr):
            return True
        if isinstance(expr, cst.Name):
            values = self._store_values.get(expr.value) if hasattr(self, "_store_values") else None
            return bool(values) and expr.value not in self.params and all(
                v is not None and self.is_python_number(v) for v in values)
        if isinstance(expr, cst.BinaryOperation):
            return self.is_python_number(expr.left) and self.is_python_number(expr.right)
        if isinstance(expr, cst.UnaryOperation):
            return isinstance(expr.operator, (cst.Minus, cst.Plus)) and self.is_python_number(expr.expression)
        if isinstance(expr, cst.Subscript):
            return isinstance(expr.value, cst.Attribute) and expr.value.attr.value == "shape"
        if isinstance(expr, cst.Attribute) and isinstance(expr.value, cst.Call):
            qual = self.imports.qualify(expr.value.func) or ""
            return qual in {"torch.finfo", "torch.iinfo"} and expr.attr.value in {
                "max", "min", "eps", "tiny", "resolution", "smallest_normal", "bits"}
        if isinstance(expr, cst.Call):
            if isinstance(expr.func, cst.Name) and expr.func.value == "len" and expr.func.value not in self.stores:
                return True
            return isinstance(expr.func, cst.Attribute) and expr.func.attr.value in {"dim", "ndimension", "numel"} \
                and not expr.args
        return False

    def is_total(self, expr: cst.BaseExpression, floating: frozenset[str] = frozenset()) -> bool:
        """Computing ``expr`` cannot raise, whatever the values, shapes and (real, non-bool) dtypes of the
        tensors it reads: names, literals, attribute reads, elementwise ops (TOTAL_ELEMENTWISE) and
        arithmetic between one tensor and Python numbers, reductions that accept empty tensors.
        ``floating`` names tensors whose dtype the code has already tested to be floating (so
        ``torch.finfo(x.dtype)`` cannot fail). Anything else (broadcasting between two tensors,
        indexing, concatenation, reshapes, submodule calls) answers False."""
        expr = _strip_parens(expr)
        if isinstance(expr, cst.Name) or is_literal(expr):
            return True
        if isinstance(expr, cst.Attribute):
            if isinstance(expr.value, cst.Call):
                return self._total_finfo(expr.value, floating)
            return expr.attr.value not in TRANSPOSES and self.is_total(expr.value, floating)
        if isinstance(expr, cst.UnaryOperation):
            return isinstance(expr.operator, (cst.Minus, cst.Plus)) and self.is_total(expr.expression, floating)
        if isinstance(expr, cst.BinaryOperation):
            if not isinstance(expr.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.Power)):
                return False
            sides = (expr.left, expr.right)
            return all(self.is_total(x, floating) for x in sides) and any(self.is_python_number(x) for x in sides)
        if isinstance(expr, cst.Comparison):
            sides = [expr.left, *(c.comparator for c in expr.comparisons)]
            return len(sides) == 2 and all(self.is_total(x, floating) for x in sides) and (
                any(self.is_python_number(x) or not self.is_tensor(x) for x in sides))
        if isinstance(expr, cst.Call):
            return self._total_call(expr, floating)
        return False

    def shape_changing(self, expr: cst.CSTNode) -> str | None:
        """The first op in ``expr`` whose result can have another shape than its input (SHAPE_CHANGING,
        a subscript), as source text, or None."""
        for node in walk(expr):
            if isinstance(node, cst.Subscript) and not (
                    isinstance(node.value, cst.Attribute) and node.value.attr.value in {"shape", "stride"}):
                return code(node)
            if isinstance(node, cst.Call):
                name = node.func.attr.value if isinstance(node.func, cst.Attribute) else (
                    (self.imports.qualify(node.func) or "").rsplit(".", 1)[-1])
                if name in SHAPE_CHANGING:
                    return code(node.func)
        return None

    def _total_finfo(self, call: cst.Call, floating: frozenset[str]) -> bool:
        if (self.imports.qualify(call.func) or "") != "torch.finfo" or len(call.args) != 1:
            return False
        arg = _strip_parens(call.args[0].value)
        if isinstance(arg, cst.Attribute) and arg.attr.value in FLOAT_DTYPES:
            return True
        return isinstance(arg, cst.Attribute) and arg.attr.value == "dtype" and code(arg.value) in floating

    def _total_call(self, call: cst.Call, floating: frozenset[str]) -> bool:
        qual = self.imports.qualify(call.func) or ""
        if isinstance(call.func, cst.Attribute) and not qual.startswith("torch."):
            name, operands = call.func.attr.value, [call.func.value]
        elif qual.startswith(("torch.", "torch.nn.functional.")) and call.args:
            name, operands = qual.rsplit(".", 1)[-1], [call.args[0].value]
            call = call.with_changes(args=call.args[1:])
        else:
            return False
        if name in FLOATING_ONLY and not _floating_operand(operands[0], floating):
            return False
        if name in TOTAL_REDUCTIONS and not call.args:
            return self.is_total(operands[0], floating)
        if name not in TOTAL_ELEMENTWISE or not self.is_total(operands[0], floating):
            return False
        return all(a.star == "" and (self.is_python_number(a.value) or is_literal(a.value)
                                     or _is_dtype(a.value)) for a in call.args)


def _floating_operand(expr: cst.BaseExpression, floating: frozenset[str]) -> bool:
    """``expr`` is a tensor known to be floating: a name the code tested, or a cast (``x.float()``)."""
    expr = _strip_parens(expr)
    if isinstance(expr, cst.Name):
        return expr.value in floating
    return (isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute)
            and expr.func.attr.value in {"float", "double", "half", "bfloat16"} and not expr.args)


def _is_dtype(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, cst.Attribute) and (expr.attr.value == "dtype" or (
        isinstance(expr.value, cst.Name) and expr.value.value == "torch"))


def _in_place(name: str) -> bool:
    """``add_``, ``copy_``, ``fill_``: in-place tensor methods mutate their receiver."""
    return name.endswith("_") and not name.endswith("__")


in_place = _in_place


def _is_attr_or_keyword(parent: cst.CSTNode, child: cst.Name) -> bool:
    if isinstance(parent, cst.Attribute) and parent.attr is child:
        return True
    if isinstance(parent, cst.Arg) and parent.keyword is child:
        return True
    if isinstance(parent, (cst.FunctionDef, cst.ClassDef)) and parent.name is child:
        return True
    if isinstance(parent, (cst.ImportAlias, cst.AsName)):
        return True
    return False


def _target_names(target: cst.CSTNode) -> list[str]:
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        out: list[str] = []
        for el in target.elements:
            out.extend(_target_names(el.value))
        return out
    if isinstance(target, cst.StarredElement):
        return _target_names(target.value)
    return []


target_names = _target_names


def _target_name_nodes(target: cst.CSTNode) -> list[cst.Name]:
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for el in target.elements for n in _target_name_nodes(el.value)]
    if isinstance(target, cst.StarredElement):
        return _target_name_nodes(target.value)
    return []


def _all_params(params: cst.Parameters) -> list[cst.Param]:
    out = list(params.posonly_params) + list(params.params) + list(params.kwonly_params)
    if isinstance(params.star_arg, cst.Param):
        out.append(params.star_arg)
    if params.star_kwarg is not None:
        out.append(params.star_kwarg)
    return out


all_params = _all_params


def names_in(node: cst.CSTNode) -> set[str]:
    """Variable names read or written anywhere in ``node`` (attribute names excluded)."""
    out: set[str] = set()
    for parent in walk(node):
        if isinstance(parent, cst.Attribute):
            for child in (parent.value,):
                if isinstance(child, cst.Name):
                    out.add(child.value)
            continue
        for child in children(parent):
            if isinstance(child, cst.Name) and not _is_attr_or_keyword(parent, child):
                out.add(child.value)
    if isinstance(node, cst.Name):
        out.add(node.value)
    return out


def body_statements(block: cst.BaseSuite) -> list[cst.BaseSmallStatement] | None:
    """The small statements of a block, or None if it holds a compound statement."""
    out: list[cst.BaseSmallStatement] = []
    if isinstance(block, cst.SimpleStatementSuite):
        return list(block.body)
    assert isinstance(block, cst.IndentedBlock)
    for stmt in block.body:
        if not isinstance(stmt, cst.SimpleStatementLine):
            return None
        out.extend(stmt.body)
    return out


def has_comments(block: cst.BaseSuite) -> bool:
    for node in walk(block):
        if isinstance(node, cst.Comment):
            return True
    return False


def make_call(func: str, *args: cst.BaseExpression | str, **kwargs: cst.BaseExpression | str) -> cst.Call:
    def as_expr(v: cst.BaseExpression | str) -> cst.BaseExpression:
        return parse_expr(v) if isinstance(v, str) else v

    arg_nodes = [cst.Arg(value=_strip_parens(as_expr(a))) for a in args]
    arg_nodes += [
        cst.Arg(keyword=cst.Name(k), value=as_expr(v), equal=cst.AssignEqual(
            whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")))
        for k, v in kwargs.items()
    ]
    return cst.Call(func=parse_expr(func), args=arg_nodes)


def _strip_parens(expr: cst.BaseExpression) -> cst.BaseExpression:
    if getattr(expr, "lpar", None):
        return expr.with_changes(lpar=(), rpar=())
    return expr


strip_parens = _strip_parens


def paren(expr: cst.BaseExpression) -> cst.BaseExpression:
    """Parenthesise an expression unless it is atomic."""
    if isinstance(expr, (cst.Name, cst.Attribute, cst.Call, cst.Subscript, cst.Integer, cst.Float,
                         cst.SimpleString)) or getattr(expr, "lpar", None):
        return expr
    return expr.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])


def sequence_names(nodes: Sequence[cst.CSTNode]) -> set[str]:
    out: set[str] = set()
    for n in nodes:
        out |= names_in(n)
    return out




def module_attributes(cls: cst.ClassDef, imports: ImportMap) -> set[str]:
    """``self.X`` set in ``__init__`` to a ``torch.nn`` module that returns one tensor when called."""
    out: set[str] = set()
    for stmt in cls.body.body:
        if not (isinstance(stmt, cst.FunctionDef) and stmt.name.value == "__init__"):
            continue
        for node in walk(stmt.body):
            if isinstance(node, cst.Assign) and len(node.targets) == 1 and isinstance(node.value, cst.Call):
                t = node.targets[0].target
                qual = imports.qualify(node.value.func) or ""
                if isinstance(t, cst.Attribute) and isinstance(t.value, cst.Name) and t.value.value == "self" \
                        and qual.startswith("torch.nn.") and qual.rsplit(".", 1)[-1][:1].isupper() \
                        and qual.rsplit(".", 1)[-1] not in NON_TENSOR_MODULES:
                    out.add(t.attr.value)
    return out
