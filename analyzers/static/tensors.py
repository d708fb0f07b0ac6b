"""Light tensor-ness inference for one function, without types and without importing torch.

Every expression gets a *kind*:

* ``T``: certainly a tensor (a torch factory/op result, a tensor method result, a parameter
  annotated ``torch.Tensor``, a submodule output in ``forward``, a registered buffer or parameter,
  a non-default parameter of ``forward``; see ``docs/check.md``);
* ``M``: maybe a tensor (``Optional[torch.Tensor]``, a ``forward`` parameter defaulting to ``None``):
  enough for ``.item()``-style method rules, not for truthiness rules;
* ``S``: a Python number computed from tensor data (``.item()``, ``float(t)``): the break already
  happened where it was produced, so branching on it later is ordinary Python;
* ``N``: anything else (shapes, dtypes, ``x.dim()``, ``self.training``, constants, unknowns).

Precision beats recall: when in doubt the answer is ``N``. :class:`TensorKinds` keeps the kinds of one
function's names as its statements are walked (it is the base of the walker); which torch calls and
methods return tensors comes from :mod:`mend.analyzers.static.torch_facts`.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from mend.analyzers.static import torch_facts
from mend.analyzers.static.names import Scope, children

if TYPE_CHECKING:
    from mend.analyzers.static.rules.context import ClassFacts, FunctionNode

N, M, T, S = 0, 1, 2, 3

# Modules whose functions never take or return tensors: a call into one is not a maybe-tensor helper.
NOT_TENSOR_LIBS = frozenset(
    "builtins numpy np math cmath random os sys time datetime logging warnings json re collections itertools "
    "functools typing copy inspect operator dataclasses enum abc contextlib threading pickle struct hashlib "
    "zlib string textwrap pathlib io".split())
NUMBER_CASTS = ("builtins.float", "builtins.int", "builtins.bool")
NUMBER_REDUCERS = ("builtins.abs", "builtins.max", "builtins.min", "builtins.sum")
TRUTH_REDUCERS = ("builtins.any", "builtins.all")  # `any(mask)`: the truth of each element of a tensor
COPIES = ("copy.deepcopy", "copy.copy")  # a copy has the kind of what it copies


def torch_call_kind(qual: str) -> int:
    """Kind of the result of calling the torch function ``qual`` (``torch.*``): a data-dependent bool
    (``torch.equal``) counts as a tensor here, since branching on it breaks the graph the same way."""
    return T if qual in torch_facts.DATA_BOOL_TORCH or torch_facts.returns_tensor(qual) else N


def _unquoted(ann: ast.AST | None) -> ast.AST | None:
    """A string annotation (``"Optional[Tensor]"``) parsed; None for one that does not parse."""
    if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
        try:
            return ast.parse(ann.value, mode="eval").body
        except SyntaxError:
            return None
    return ann


def is_tensor_annotation(ann: ast.AST | None, qualify) -> int:
    """Kind implied by an annotation: ``T`` for tensors, ``M`` for optional tensors, else ``N``."""
    ann = _unquoted(ann)
    if ann is None:
        return N
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        parts = [ann.left, ann.right]
        kinds = [is_tensor_annotation(p, qualify) for p in parts]
        if any(k in (T, M) for k in kinds):
            return M
        return N
    if isinstance(ann, ast.Subscript):
        head = qualify(ann.value) or ""
        tail = head.rsplit(".", 1)[-1]
        if tail in ("Optional", "Union"):
            inner = ann.slice
            elts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
            if any(is_tensor_annotation(e, qualify) in (T, M) for e in elts):
                return M
        return N
    q = qualify(ann)
    if q is None:
        if isinstance(ann, ast.Name) and ann.id == "Tensor":
            return T
        return N
    if q.startswith("torch.") and q.endswith("Tensor") and q.count(".") == 1:
        return T
    if q in ("torch.nn.Parameter", "torch.nn.parameter.Parameter"):
        return T
    return N


def _tensor_or_none(ann: ast.AST | None, qualify) -> bool:
    """``ann`` admits tensors and None only (``Optional[Tensor]``, ``Tensor | None``)."""
    ann = _unquoted(ann)
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.BitOr):
        parts = [ann.left, ann.right]
    elif isinstance(ann, ast.Subscript) and (qualify(ann.value) or "").rsplit(".", 1)[-1] in ("Optional", "Union"):
        parts = ann.slice.elts if isinstance(ann.slice, ast.Tuple) else [ann.slice]
    else:
        return False
    return all((isinstance(p, ast.Constant) and p.value is None) or is_tensor_annotation(p, qualify) == T
               for p in parts)


def _names(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def array_index(index: ast.AST) -> bool:
    """A multi-dimensional index with a slice (``[:, 0]``): only arrays take one, never lists or None."""
    return isinstance(index, ast.Tuple) and any(isinstance(x, ast.Slice) for x in index.elts)


def _is_number(e: ast.AST) -> bool:
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        e = e.operand
    return isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) and not isinstance(e.value, bool)


class TensorKinds:
    """The kinds of one function's names, updated statement by statement, and the kind of any
    expression under them. The walker (:class:`~mend.analyzers.static.walker.FunctionWalker`) sets the
    attributes below and calls :meth:`bind_params` first, then :meth:`assign` for each binding."""

    scope: Scope
    node: FunctionNode
    self_name: str | None  # the method's first parameter
    is_forward: bool
    facts: ClassFacts | None  # what the owning class assigns to ``self``
    loop_vars: dict[str, str]  # loop variable -> the ``self`` attribute (a ModuleList) it iterates
    env: dict[str, int]  # name -> kind
    bool_names: set[str]  # names holding boolean tensors (masks)
    ptr_names: set[str]  # names holding data_ptr()/id() values
    local_values: dict[str, object]  # name -> last value (an expression, or (call, index) unpacked)
    optional_tensors: set[str]  # parameters annotated ``Optional[Tensor]``: a tensor once tested ``is not None``
    tensor_or_none: set[str]  # those of them that can be nothing else (not ``Union[Tensor, List]``)
    tensor_params: frozenset[str]  # parameters some call in the file passes a certain tensor
    static_params: frozenset[str]  # parameters some call in the file passes a Python value (a tuple, a shape)
    comp_kinds: dict[int, int]  # id of a list comprehension / generator -> the kind of its elements
    tensor_lists: set[str]  # lists some tensor was stored into (`sizes[i] = offsets[i + 1] - offsets[i]`)

    def qualify(self, expr: ast.AST) -> str | None:
        return self.scope.qualify(expr)

    def is_self_attr(self, expr: ast.AST) -> str | None:
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == self.self_name:
            return expr.attr
        return None

    def _self_module(self, expr: ast.AST) -> bool:
        """``expr`` is ``self.attr`` where ``attr`` holds a submodule."""
        attr = self.is_self_attr(expr)
        return bool(attr and self.facts and attr in self.facts.module_attrs)

    # -- parameters ------------------------------------------------------------------------
    def bind_params(self) -> None:
        a = self.node.args
        positional = [*a.posonlyargs, *a.args]
        defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
        pairs = list(zip(positional, defaults)) + list(zip(a.kwonlyargs, a.kw_defaults))
        for i, (arg, default) in enumerate(pairs):
            if i == 0 and self.self_name is not None and arg.arg == self.self_name:
                continue
            kind = self._param_kind(arg, default)
            if arg.arg in self.tensor_params:
                kind = T  # the file calls this function with a tensor there (ModuleAnalyzer)
            if kind == M and is_tensor_annotation(arg.annotation, self.qualify) != N:
                self.optional_tensors.add(arg.arg)
                if _tensor_or_none(arg.annotation, self.qualify):
                    self.tensor_or_none.add(arg.arg)
            if kind:
                self.env[arg.arg] = kind
                if "mask" in arg.arg.lower() and kind == T:
                    self.bool_names.add(arg.arg)

    def _param_kind(self, arg: ast.arg, default: ast.expr | None) -> int:
        kind = is_tensor_annotation(arg.annotation, self.qualify)
        if kind == T and isinstance(default, ast.Constant) and default.value is None:
            return M
        if kind != N or arg.annotation is not None:
            return kind
        if (self.is_forward and default is None and arg.arg in self._tensor_like_names()
                and arg.arg not in self.static_params):
            # forward's parameters are tensors in practice; flags such as
            # `output_attentions` (never used with `.attr` or `[...]`) are not
            return T
        if default is None or (isinstance(default, ast.Constant) and default.value is None):
            # unannotated parameters may be tensors: enough for `.item()`-style method rules,
            # never for truthiness rules
            return M
        return N

    def _tensor_like_names(self) -> set[str]:
        """Names used as ``name.attr`` or ``name[...]`` somewhere in this function (computed once)."""
        cached = getattr(self, "_tln", None)
        if cached is not None:
            return cached
        found: set[str] = set()
        self._tln = found
        stack: list[ast.AST] = list(self.node.body)
        while stack:
            n = stack.pop()
            t = n.__class__
            if t is ast.Attribute or t is ast.Subscript:
                v = n.value
                if v.__class__ is ast.Name:
                    found.add(v.id)
            elif t is ast.FunctionDef or t is ast.AsyncFunctionDef or t is ast.ClassDef or t is ast.Lambda:
                continue
            stack.extend(children(n))
        return found

    # -- kinds of expressions ------------------------------------------------------------------
    def kind(self, e: ast.AST) -> int:
        t = e.__class__
        if t is ast.Name:
            return self.env.get(e.id, N)
        rule = _KIND_OF.get(t)
        return rule(self, e) if rule is not None else N

    def _attribute_kind(self, e: ast.Attribute) -> int:
        attr = self.is_self_attr(e)
        if attr is not None:
            return T if (self.facts and attr in self.facts.tensor_attrs) else N
        base = self.kind(e.value)
        return base if base in (T, M) and e.attr in torch_facts.TENSOR_ATTRS else N

    def _subscript_kind(self, e: ast.Subscript) -> int:
        base = self.kind(e.value)
        if base == M and (self.optional_root(e.value, strict=True) or array_index(e.slice)):
            return T  # `cache_position[0]` of an Optional[Tensor]: None cannot be indexed; `x[:, 0]`: an array
        return base if base in (T, M) else N

    def _binop_kind(self, e: ast.BinOp) -> int:
        kinds = (self.kind(e.left), self.kind(e.right))
        for k in (T, M, S):
            if k in kinds:
                return k
        return N

    def _compare_kind(self, e: ast.Compare) -> int:
        if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in e.ops):
            return N
        operands = [e.left, *e.comparators]
        kinds = [self.kind(o) for o in operands]
        if T in kinds or any(self.python_draw(o) for o in operands):
            return T  # a Python draw Dynamo traces is a graph input: comparing it is data-dependent
        if M in kinds:
            # `mask > 0`, `ids == self.config.image_token_id` on a maybe-tensor is a maybe-tensor (a
            # mask): enough for `.item()`-style method rules on it, never for truthiness rules
            return M
        return N

    def python_draw(self, e: ast.AST, depth: int = 0) -> str | None:
        """The Python ``random`` function Dynamo traces (``random.uniform``) whose draw ``e`` is, or a
        comparison or truth test in ``e`` reads (through locals); else None."""
        t = e.__class__
        if depth > 6:
            return None
        if t is ast.Call:
            q = self.qualify(e.func)
            return q if q in torch_facts.TRACED_PYTHON_RANDOM else None
        if t is ast.Name:
            v = self.local_values.get(e.id)
            return self.python_draw(v, depth + 1) if isinstance(v, ast.AST) and v is not e else None
        parts = {ast.Compare: lambda: [e.left, *e.comparators], ast.BoolOp: lambda: e.values,
                 ast.UnaryOp: lambda: [e.operand]}.get(t)
        for part in parts() if parts else ():
            found = self.python_draw(part, depth + 1)
            if found:
                return found
        return None

    def _boolop_kind(self, e: ast.BoolOp) -> int:
        if not isinstance(e.op, ast.And):
            return T if T in [self.kind(v) for v in e.values] else N
        narrowed: list[str] = []
        try:
            for v in e.values:
                if self._eager_only(v):  # `not torch.compiler.is_compiling() and t`: False under compile
                    return N
                if self.kind(v) == T:
                    return T
                narrowed += self.narrow(v)
            return N
        finally:
            self.widen(narrowed)

    def _eager_only(self, e: ast.AST) -> bool:
        """``e`` is ``not <is-compiling call>()``: False wherever Dynamo traces, so the ``and`` operands after it
        are never evaluated there (mend's own repairs write it: eager keeps a test, compiled code skips it)."""
        if not (isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.Not) and isinstance(e.operand, ast.Call)):
            return False
        q = self.qualify(e.operand.func)
        return q is not None and torch_facts.is_compiling_call(q)

    # -- narrowing: `x is not None` makes an optional tensor a tensor ------------------------------
    def not_none_names(self, test: ast.AST) -> list[str]:
        """Optional-tensor names that ``test`` (or every operand of an ``and`` chain) proves not None."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            return [n for v in test.values for n in self.not_none_names(v)]
        if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.IsNot)
                and isinstance(test.left, ast.Name) and isinstance(test.comparators[0], ast.Constant)
                and test.comparators[0].value is None and test.left.id in self.optional_tensors
                and self.env.get(test.left.id) == M):
            return [test.left.id]
        return []

    def narrow(self, test: ast.AST) -> list[str]:
        """Make the names ``test`` proves not None tensors; returns them (for :meth:`widen`)."""
        names = self.not_none_names(test)
        for n in names:
            self.env[n] = T
        return names

    def widen(self, names: list[str]) -> None:
        for n in names:
            if self.env.get(n) == T:
                self.env[n] = M

    def _unaryop_kind(self, e: ast.UnaryOp) -> int:
        k = self.kind(e.operand)
        return k if k in (T, S) else N

    def _ifexp_kind(self, e: ast.IfExp) -> int:
        return T if (self.kind(e.body), self.kind(e.orelse)) == (T, T) else N

    def _namedexpr_kind(self, e: ast.NamedExpr) -> int:
        return self.kind(e.value)

    def call_kind(self, e: ast.Call) -> int:
        f = e.func
        if f.__class__ is ast.Name:
            if f.id in (torch_facts.CAPTURE_INDEX_HELPER, torch_facts.KEPT_VALUES_HELPER):
                return N  # a captured slice bound, or the kept Python copy of a shape tensor
            if f.id == torch_facts.KEEP_VALUES_HELPER and e.args:
                return self.kind(e.args[0])  # the shape tensor itself
            if f.id == torch_facts.ARANGE_HELPER:
                return self._function_call_kind("torch.arange", e)  # torch.arange with a kept copy
        q = self.qualify(f)
        if q is not None:
            return self._function_call_kind(q, e)
        if isinstance(f, ast.Attribute):
            return self._method_call_kind(f, e)
        if isinstance(f, ast.Name) and f.id in self.loop_vars:
            return T  # a layer of a ModuleList iterated in forward
        if isinstance(f, ast.Subscript) and self._self_module(f.value):
            return T
        return N

    def _function_call_kind(self, q: str, e: ast.Call) -> int:
        if q.startswith("torch."):
            if q in torch_facts.PYTHON_NUMBER_OPS and e.args:
                # a tensor only if an argument is one: Dynamo folds numbers to a number
                kinds = {self.kind(a) for a in [*e.args, *(k.value for k in e.keywords)]}
                return T if T in kinds else M if M in kinds else N
            return torch_call_kind(q)
        if q in NUMBER_CASTS:
            return S if (e.args and self.kind(e.args[0]) in (T, S)) else N
        if q in NUMBER_REDUCERS:
            kinds = [self.kind(a) for a in e.args]
            return T if T in kinds else (S if S in kinds else N)
        if q in TRUTH_REDUCERS:
            return T if len(e.args) == 1 and self.kind(e.args[0]) == T else N
        if q in COPIES and len(e.args) == 1:
            return self.kind(e.args[0])
        if q.startswith("math."):
            return S if any(self.kind(a) in (T, S) for a in e.args) else N
        if q.split(".", 1)[0] not in NOT_TENSOR_LIBS and self._tensor_argument(e):
            # a helper of the project or a library applied to a tensor: maybe a tensor (enough for
            # `.item()`-style method rules on its result, never for truthiness rules)
            return M
        return N

    def _method_call_kind(self, f: ast.Attribute, e: ast.Call) -> int:
        attr = self.is_self_attr(f)
        if attr is not None:
            if self.facts and attr in self.facts.module_attrs:
                return T
            return M if self._tensor_argument(e) else N  # `mask = self._merge_masks(mask, other)`
        base = self.kind(f.value)
        if base not in (T, M):
            return N
        if f.attr in torch_facts.DATA_SCALAR_METHODS:
            return S
        if f.attr in torch_facts.METADATA_METHODS:
            return N
        if base == M and self.optional_root(f.value):
            return T  # `(input_ids == k).sum()` with `input_ids: Optional[Tensor]`: None has no `.sum()`
        return base

    def optional_root(self, e: ast.AST, strict: bool = False) -> bool:
        """``e`` is computed from a parameter annotated ``Optional[Tensor]`` (through methods, indexing,
        comparisons and arithmetic): calling a method on it proves that parameter was a tensor. With
        ``strict``, for indexing and iteration (which lists take too), a parameter that is a tensor or None."""
        while True:
            t = e.__class__
            if t is ast.Name:
                return e.id in (self.tensor_or_none if strict else self.optional_tensors)
            if t is ast.Attribute or t is ast.Subscript:
                e = e.value
            elif t is ast.Call and e.func.__class__ is ast.Attribute:
                e = e.func.value
            elif t is ast.Compare:
                e = e.left
            elif t is ast.BinOp:
                e = e.left if self.kind(e.left) == M else e.right
            else:
                return False

    def python_value(self, e: ast.AST) -> bool:
        """``e`` is certainly a Python value, never a tensor: a literal (tuple, list, dict, string,
        number), a shape or size of a tensor, ``len(...)``, or a local last assigned one of those."""
        t = e.__class__
        if t is ast.Name:
            if self.env.get(e.id, N) != N:
                return False
            v = self.local_values.get(e.id)
            return isinstance(v, ast.AST) and v is not e and self._literal(v)
        return self._literal(e)

    def _literal(self, e: ast.AST) -> bool:
        t = e.__class__
        if t in (ast.Tuple, ast.List, ast.Dict, ast.Set, ast.JoinedStr):
            return True
        if t is ast.Constant:
            return e.value is not None
        if t is ast.Attribute:
            return e.attr == "shape" and self.kind(e.value) in (T, M)
        if t is ast.Subscript:
            return self._literal(e.value) and isinstance(e.value, ast.Attribute)
        if t is ast.Call:
            f = e.func
            if isinstance(f, ast.Attribute) and f.attr in ("size", "dim") and self.kind(f.value) in (T, M):
                return True
            return self.qualify(f) == "builtins.len"
        return False

    def python_number(self, e: ast.AST, depth: int = 0) -> bool:
        """``e`` is certainly a Python number: a numeric constant, a size (``x.shape[1]``, ``x.size(0)``,
        a name unpacked from ``x.size()``), ``len(...)``, a parameter annotated ``int``/``float``, or
        arithmetic on those."""
        t = e.__class__
        if depth > 8:
            return False
        if t is ast.Constant:
            return isinstance(e.value, (int, float)) and not isinstance(e.value, bool)
        if t is ast.BinOp:
            return self.python_number(e.left, depth + 1) and self.python_number(e.right, depth + 1)
        if t is ast.UnaryOp:
            return self.python_number(e.operand, depth + 1)
        if t is ast.Subscript:
            return self._size_of_tensor(e.value)
        if t is ast.Call:
            return self._size_of_tensor(e) or self.qualify(e.func) == "builtins.len"
        if t is ast.Name:
            if self.env.get(e.id, N) != N:
                return False
            v = self.local_values.get(e.id)
            if isinstance(v, tuple):  # unpacked: `b, n = x.size()` / `= x.shape`
                return self._size_of_tensor(v[0])
            if isinstance(v, ast.AST):
                return v is not e and self.python_number(v, depth + 1)
            return e.id in self._number_params()
        return False

    def _size_of_tensor(self, e: ast.AST) -> bool:
        """``x.shape`` / ``x.size(...)`` of a tensor or maybe-tensor."""
        if isinstance(e, ast.Attribute):
            return e.attr == "shape" and self.kind(e.value) in (T, M)
        if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute):
            return e.func.attr == "size" and self.kind(e.func.value) in (T, M)
        return False

    def _number_params(self) -> frozenset[str]:
        """Parameters annotated ``int`` or ``float``."""
        a = self.node.args
        return frozenset(p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)
                         if isinstance(p.annotation, ast.Name) and p.annotation.id in ("int", "float"))

    def _tensor_argument(self, e: ast.Call) -> bool:
        return any(self.kind(a) in (T, M) for a in (*e.args, *(k.value for k in e.keywords)))

    def is_bool_tensor(self, expr: ast.AST) -> bool:
        """``expr`` is a boolean tensor (a mask): comparisons of tensors or of maybe-tensors (``edge_index[0] !=
        edge_index[1]`` of what a helper returned: a mask wherever they are tensors), ``isnan``, ``.bool()``, ..."""
        if isinstance(expr, ast.Compare):
            return self.kind(expr) in (T, M)
        if isinstance(expr, ast.Name):
            return expr.id in self.bool_names
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Invert):
            return self.is_bool_tensor(expr.operand)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
            return self.is_bool_tensor(expr.left) or self.is_bool_tensor(expr.right)
        if isinstance(expr, ast.Call):
            return self._bool_call(expr)
        return False

    def _bool_call(self, expr: ast.Call) -> bool:
        if self.qualify(expr.func) in torch_facts.BOOL_TORCH:
            return True
        f = expr.func
        if isinstance(f, ast.Attribute) and f.attr in torch_facts.BOOL_OPS and self.kind(f.value) in (T, M):
            return True
        if isinstance(f, ast.Attribute) and f.attr == "to" and expr.args:
            return self.qualify(expr.args[0]) == "torch.bool"
        return False

    # -- iteration: `for` and comprehension targets ----------------------------------------------
    def bind_iteration(self, target: ast.AST, it: ast.AST) -> None:
        """Bind the target of ``for target in it`` (a loop or a comprehension): the elements of a
        tensor are tensors, ``enumerate`` gives (number, element), ``zip`` gives one element of each."""
        if isinstance(it, ast.Call) and not it.keywords:
            q = self.qualify(it.func)
            if q == "builtins.enumerate" and len(it.args) == 1:
                if isinstance(target, ast.Tuple) and len(target.elts) == 2:
                    self.assign(target.elts[0], None, N)
                    self.bind_iteration(target.elts[1], it.args[0])
                    return
            elif q == "builtins.zip" and it.args:
                if isinstance(target, ast.Tuple) and len(target.elts) == len(it.args):
                    for t, a in zip(target.elts, it.args):
                        self.bind_iteration(t, a)
                    return
        kind = self.kind(it)
        if kind == M and self.optional_root(it, strict=True):
            kind = T  # iterating an Optional[Tensor] proves it is a tensor (None is not iterable)
        self.assign(target, None, T if T in (kind, self.element_kind(it)) else N)

    def element_kind(self, e: ast.AST) -> int:
        """``T`` when ``e`` is a list comprehension (or a name last assigned one) whose elements are
        tensors or tuples holding tensors (``[h * w for h, w in spatial_shapes]``), else ``N``."""
        if isinstance(e, ast.Name) and self.env.get(e.id, N) == N:
            if e.id in self.tensor_lists:
                return T
            e = self.local_values.get(e.id)
        if not isinstance(e, (ast.ListComp, ast.GeneratorExp)):
            return N
        if id(e) not in self.comp_kinds:  # not walked yet: an argument of the call being checked
            self.comp_kinds[id(e)] = self.comprehension_kind(e)
        return self.comp_kinds[id(e)]

    def comprehension_kind(self, n: ast.ListComp | ast.GeneratorExp) -> int:
        """``T`` when the elements of ``n`` hold tensors (its targets bound for the moment)."""
        saved = {name: self.env.get(name) for gen in n.generators for name in _names(gen.target)}
        try:
            for gen in n.generators:
                self.bind_iteration(gen.target, gen.iter)
            return T if self.holds_tensor(n.elt) else N
        finally:
            for name, kind in saved.items():
                if kind is None:
                    self.env.pop(name, None)
                else:
                    self.env[name] = kind

    def holds_tensor(self, e: ast.AST) -> bool:
        """``e`` is a tensor, or a tuple/list literal with one among its elements (as an argument:
        ``self._pad1d(x, (self.padding_total, extra))``, the callee unpacks tensors from it)."""
        if isinstance(e, (ast.Tuple, ast.List)):
            return any(self.kind(x) == T for x in e.elts)
        return self.kind(e) == T

    # -- bindings ----------------------------------------------------------------------------
    def assign(self, target: ast.AST, value: ast.AST | None, kind: int) -> None:
        """``target = value`` where ``value`` has ``kind`` (``value`` None: unknown, from unpacking)."""
        if isinstance(target, ast.Name):
            self._bind_name(target.id, value, kind)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                for t, v in zip(target.elts, value.elts):
                    self.assign(t, v, self.kind(v))
            else:
                self._unpack(target, value, kind)

    def _bind_name(self, name: str, value: ast.AST | None, kind: int) -> None:
        self.env[name] = kind
        self.tensor_lists.discard(name)
        if value is not None and self.is_bool_tensor(value):
            self.bool_names.add(name)
        else:
            self.bool_names.discard(name)
        if value is not None and self._is_ptr_value(value):
            self.ptr_names.add(name)
        else:
            self.ptr_names.discard(name)
        if value is not None:
            self.local_values[name] = value
            if kind == M and self.optional_root(value):
                self.optional_tensors.add(name)

    def _unpack(self, target: ast.Tuple | ast.List, value: ast.AST | None, kind: int) -> None:
        passed = set()
        if isinstance(value, ast.Call):
            passed = {a.id for a in (*value.args, *(k.value for k in value.keywords))
                      if isinstance(a, ast.Name) and self.env.get(a.id) in (T, M)}
        if kind == T and self._module_output(value):
            # `h, n, w = self.embed(x)`, `h, cache = outputs[:2]` of `outputs = self.attn(x)`: a submodule
            # may return a tuple of tensors, numbers and caches
            kind = M
        elif kind != T:
            kind = N
        for i, t in enumerate(target.elts):
            k = kind
            if k == N and isinstance(t, ast.Name) and t.id in passed:
                k = M  # `mask, x = pad(mask=mask, x=x)`: a tensor passed through a helper
            self.assign(t, None, k)
            if isinstance(t, ast.Name) and isinstance(value, ast.Call):
                self.local_values[t.id] = (value, i)

    def _module_output(self, value: ast.AST | None, depth: int = 0) -> bool:
        """``value`` is a submodule's output, or an index or slice of one (through locals)."""
        if depth > 4 or value is None:
            return False
        if isinstance(value, ast.Call):
            return self._module_call(value)
        if isinstance(value, ast.Subscript):
            return self._module_output(value.value, depth + 1)
        if isinstance(value, ast.Name):
            v = self.local_values.get(value.id)
            return isinstance(v, ast.AST) and v is not value and self._module_output(v, depth + 1)
        return False

    def _module_call(self, call: ast.Call) -> bool:
        """``call`` calls a submodule (``self.layer(x)``, a layer of a ModuleList in a loop)."""
        f = call.func
        return (self._self_module(f) or (isinstance(f, ast.Name) and f.id in self.loop_vars)
                or (isinstance(f, ast.Subscript) and self._self_module(f.value)))

    def _is_ptr_value(self, value: ast.AST) -> bool:
        if isinstance(value, ast.Call):
            f = value.func
            if isinstance(f, ast.Attribute) and f.attr == "data_ptr":
                return True
            if self.qualify(f) == "builtins.id":
                return True
        return False


_KIND_OF = {
    ast.Attribute: TensorKinds._attribute_kind,
    ast.Call: TensorKinds.call_kind,
    ast.Subscript: TensorKinds._subscript_kind,
    ast.BinOp: TensorKinds._binop_kind,
    ast.Compare: TensorKinds._compare_kind,
    ast.BoolOp: TensorKinds._boolop_kind,
    ast.UnaryOp: TensorKinds._unaryop_kind,
    ast.IfExp: TensorKinds._ifexp_kind,
    ast.NamedExpr: TensorKinds._namedexpr_kind,
}
