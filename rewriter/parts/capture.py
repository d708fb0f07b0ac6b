"""Dynamo's scalar and dynamic-shape capture, switched on for one site (the fallback of MND301-MND311,
and the lambda form MND512 shares).

A tensor value turned into a Python number (``.item()``, ``int(t)``, a tensor used as a size or a slice
bound) or an operator whose output shape depends on the data (``nonzero``, a boolean mask) breaks the
graph unless Dynamo *captures* it as a symbolic value (``capture_scalar_outputs`` /
``capture_dynamic_output_shape_ops``). Switching those on globally changes every compiled region of the
process; a repaired library must not do that. Two forms, both **unsafe**:

* A function that is compiled itself (``@torch.compile``) gets ``@torch._dynamo.config.patch(flag=True)``
  above the compile decorator: active while Dynamo traces it.
* Anywhere else (a ``forward``, a helper called from compiled code) the site's expression ``E`` becomes
  ``_mend_captured(lambda: E)``. Eager calls ``E`` and nothing more; under compile the helper turns
  capture on for the traced frame while ``E`` is traced and back to what it was after it (the frame's
  ShapeEnv settings, set while tracing, and ``patch_dynamo_config(capture_scalar_outputs=True)``, which
  Dynamo traces).

A stored slice (``out[a:b] = v``) cannot move into a lambda: each bound becomes ``_mend_index(b)`` (eager:
``b`` itself; under compile its captured number).

Declined where the lambda would change what the expression means (``yield``, ``await``, an assignment
expression, zero-argument ``super()``, ``locals()``/``vars()``/``eval``), and wherever the captured value would leave tensor operations in this
function: a branch or loop on it, a comparison, a call of Python code (``self.helper(n)``, a function
that may branch on it), a return, a store; a torch call that must guard on it (``torch.arange`` of a
float bound or from a start other than zero, ``F.interpolate``, ``F.pad``: ``CAPTURE_GUARDED_CALLS``;
``torch.arange(n)`` inside the captured expression traces); ``.tolist()`` or iteration of a
tensor whose length is data-dependent (a comprehension's ``for g in torch.unique(ids)`` too). Each of
those breaks again inside the capture, or fails to compile, where the original broke once (measured on
the model zoo, torch 2.13). Tensors of data-dependent lengths collected in a list (a comprehension's
elements, ``L.append(t)``) each get a length of their own: the list may be joined along that length
(``torch.cat``), counted or returned; ``pad_sequence`` compares the lengths and breaks, so the break would
only move from the operator to it (vit-pytorch's adaptive token sampling; NaViT's image ids).
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.rules.scalars import DYNAMIC_SHAPE_METHODS, DYNAMIC_SHAPE_TORCH
from mend.analyzers.static.torch_facts import (
    CAPTURE_COUNTING_RANGE,
    CAPTURE_GUARDED_CALLS,
    CAPTURE_GUARDED_METHODS,
    CAPTURE_HELPER,
    CAPTURE_INDEX_HELPER,
    CAPTURE_LIST_JOINS,
    COMPILE_NAMES,
    HELPERS_ACT_FROM,
    HELPERS_ACT_NOTE,
    TENSOR_CHECK_HELPER,
)
from mend.rewriter.analysis import code, parse_expr
from mend.rewriter.context import FileContext
from mend.rewriter.plan import Decline, Plan
from mend.rewriter.traversal import children

# calls whose meaning depends on the frame they run in: inside a lambda they would see the lambda's
_FRAME_CALLS = frozenset({"super", "locals", "vars", "eval", "exec", "dir"})


def capture_plan(ctx: FileContext, diag: Diagnostic, node: cst.BaseExpression, flag: str, why: str) -> Plan | Decline:
    """Capture for the site ``node`` (whose value breaks the graph because of ``why``): the config patch on
    a function compiled itself, else ``_mend_captured(lambda: node)``."""
    func = ctx.enclosing_function(node)
    if func is None:
        return Decline(diag, f"{why}; and the site is not inside a function, so capture cannot be scoped")
    for d in func.decorators:
        if flag in code(d.decorator):
            return Decline(diag, f"{why}; {flag} is already enabled for this function")
    if any(_compile_decorator(ctx, d.decorator) for d in func.decorators):
        floated = _float_max(ctx, node)
        if floated is not None:
            return Decline(diag, f"{why}; capture would change the result: {floated}")
        return _decorator_plan(ctx, diag, func, flag, why)
    scripted = [d for d in func.decorators if _qualified(ctx, d.decorator).startswith("torch.jit.")]
    if scripted:
        return Decline(diag, f"{why}; `{func.name.value}` is compiled by TorchScript "
                             f"(`@{code(scripted[0].decorator)}`), which does not take the lambda of a scoped capture")
    return _scoped_plan(ctx, diag, node, why)


def tensor_check_plan(ctx: FileContext, diag: Diagnostic, check: cst.Call) -> Plan | Decline:
    """``torch._check_tensor_all(...)`` -> ``_mend_tensor_check(lambda: ...)``: capture for the call, where the
    torch version keeps the captured value of a check (a function compiled itself takes the helper too)."""
    why = "the check reads the tensor's values as a Python bool"
    if ctx.enclosing_function(check) is None:
        return Decline(diag, f"{why}; and the site is not inside a function, so capture cannot be scoped")
    reason = not_liftable(ctx, check)
    if reason is not None:
        return Decline(diag, f"{why}; capture cannot be scoped to it: {reason}")
    plan = lambda_plan(ctx, diag, check, TENSOR_CHECK_HELPER,
                       f"capture the value for this expression only under compile: `{TENSOR_CHECK_HELPER}(lambda: "
                       f"...)` on torch 2.13 and later ({why})", fallback=True)
    return plan


def _whole_site(ctx: FileContext, node: cst.BaseExpression, diag: Diagnostic) -> cst.BaseExpression:
    """The expression the diagnostic spans: ``z.transpose(1, 2).view(n)`` rather than the inner
    ``z.transpose(1, 2)`` that starts at the same position (the node a fixer found there)."""
    if diag.end_line is None or diag.end_col is None:
        return node
    end = (diag.end_line, diag.end_col - 1)
    start = ctx.positions[node].start
    for anc in ctx.ancestors(node):
        rng = ctx.positions.get(anc)
        if not isinstance(anc, cst.BaseExpression) or rng is None or rng.start != start:
            break
        if (rng.end.line, rng.end.column) == end:
            return anc
    return node


def _stored_slice_plan(ctx: FileContext, diag: Diagnostic, node: cst.Subscript, why: str) -> Plan | Decline:
    """``x[a:b] = v``: each bound becomes ``_mend_index(a)`` (eager: ``a`` itself; under compile its
    captured number), evaluated where the original evaluates it."""
    edits = []
    for element in node.slice:
        part = element.slice
        if not isinstance(part, cst.Slice):
            continue
        for bound in (part.lower, part.upper, part.step):
            if bound is None or _literal(bound):
                continue
            if isinstance(bound, cst.Call) and isinstance(bound.func, cst.Name) and bound.func.value == CAPTURE_INDEX_HELPER:
                continue
            edits.append((bound, cst.Call(func=cst.Name(CAPTURE_INDEX_HELPER), args=[cst.Arg(bound.with_changes(
                lpar=[], rpar=[]))])))
    if not edits:
        return Decline(diag, f"{why}; no slice bound of the stored subscript to capture")
    too_old = ctx.options.torch_before(HELPERS_ACT_FROM)
    if too_old:
        return Decline(diag, f"{why}; a stored slice: {too_old}")
    torch, imports = ctx.torch_name()
    return Plan(diag, f"capture the value for this expression only under compile: each bound of the stored slice "
                      f"as `{CAPTURE_INDEX_HELPER}(b)` ({why}){HELPERS_ACT_NOTE}", "unsafe", edits,
                imports=imports if torch == "torch" else [("torch", None, None)],
                helpers=[CAPTURE_INDEX_HELPER], fallback=True)


def _literal(expr: cst.BaseExpression) -> bool:
    """``3``, ``-1``: a number already."""
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        expr = expr.expression
    return isinstance(expr, cst.Integer)


def _scoped_plan(ctx: FileContext, diag: Diagnostic, node: cst.BaseExpression, why: str) -> Plan | Decline:
    node = _whole_site(ctx, node, diag)
    if isinstance(node, cst.Subscript) and isinstance(ctx.parent(node), (cst.AssignTarget, cst.AugAssign)) \
            and ctx.parent(node).target is node:
        return _stored_slice_plan(ctx, diag, node, why)
    reason = not_liftable(ctx, node) or _flow_problem(ctx, node)
    if reason is not None:
        return Decline(diag, f"{why}; capture cannot be scoped to it: {reason}")
    return lambda_plan(ctx, diag, node, CAPTURE_HELPER,
                       f"capture the value for this expression only under compile: `{CAPTURE_HELPER}(lambda: ...)` "
                       f"({why})", fallback=True)


def lambda_plan(ctx: FileContext, diag: Diagnostic, node: cst.BaseExpression, helper: str, message: str,
                fallback: bool = False) -> Plan:
    """``E`` -> ``helper(lambda: E)`` (unsafe), the helper imported; it names the module ``torch``.
    The caller has checked that ``E`` can move into a lambda (``not_liftable``)."""
    bare = node.with_changes(lpar=[], rpar=[])
    new = cst.Call(func=cst.Name(helper), args=[cst.Arg(cst.Lambda(params=cst.Parameters(), body=bare))],
                   lpar=node.lpar, rpar=node.rpar)
    torch, imports = ctx.torch_name()
    return Plan(diag, message, "unsafe", [(node, new)],
                imports=imports if torch == "torch" else [("torch", None, None)], helpers=[helper], fallback=fallback)


def not_liftable(ctx: FileContext, node: cst.CSTNode) -> str | None:
    """Why ``node`` cannot move into a lambda called on the spot, or None."""
    for sub in _walk(node):
        if isinstance(sub, (cst.Yield, cst.Await)):
            return "it holds `yield`/`await`"
        if isinstance(sub, cst.NamedExpr):
            return "it holds an assignment expression, which would bind inside the lambda"
        if isinstance(sub, cst.Call) and isinstance(sub.func, cst.Name) and sub.func.value in _FRAME_CALLS:
            return f"it calls `{sub.func.value}()`, which depends on the frame it runs in"
    child = node
    for anc in ctx.ancestors(node):
        if isinstance(anc, (cst.Lambda, cst.FunctionDef)):
            break
        if isinstance(anc, (cst.AssignTarget, cst.AugAssign, cst.AnnAssign)) and getattr(anc, "target", None) is child:
            return "the expression is stored to"
        if isinstance(anc, cst.For) and anc.iter is child:
            return "the value is a loop's iterable, whose length Dynamo cannot trace as a symbol"
        if isinstance(anc, cst.CompFor) and anc.iter is child:
            return "a comprehension iterates over the value, whose length Dynamo cannot trace as a symbol"
        if isinstance(anc, (cst.While, cst.If)) and anc.test is child:
            return "the value decides a branch, which Dynamo cannot trace on a captured value"
        if isinstance(anc, (cst.SimpleStatementLine, cst.IndentedBlock)):
            break
        child = anc
    return None


# where a value may go and stay a tensor operation's operand
_NUMBER_BUILTINS = frozenset({"int", "float", "min", "max", "abs", "len", "sum", "tuple", "list"})
_TYPE_QUERIES = frozenset({"isinstance", "type", "callable", "hasattr"})
_BRANCHES = (cst.Comparison, cst.BooleanOperation, cst.If, cst.While, cst.IfExp, cst.Assert)


def _flow_problem(ctx: FileContext, node: cst.BaseExpression, depth: int = 0) -> str | None:
    """Why the value captured at ``node`` would break again or fail to compile later, or None: it must stay
    in tensor operations of this function (see the module's docstring)."""
    for sub in _walk(node):
        if isinstance(sub, cst.Call):
            unsized = _receiver_is(sub, "tolist") and _has_dynamic_op(ctx, sub.func.value)
            problem = _call_problem(ctx, sub, unsized)
            if problem:
                return problem
    return _consumer_problem(ctx, node, not _makes_number(node), depth)


# Python's max(6, 1.5) is the int 6; under capture Dynamo's sym_max of an int and a float is a float, and the
# dtype of what it multiplies changes (an int64 tensor times 6 stays int64, times 6.0 is float32)
_FLOAT_MAX = "`{}()` of the captured integer and a float gives a float under compile, the integer in eager"


def _float_max(ctx: FileContext, node: cst.CSTNode) -> str | None:
    """The reason when ``node``'s value goes straight into Python's ``max``/``min`` beside a float literal."""
    arg = ctx.parent(node)
    while isinstance(arg, (cst.UnaryOperation, cst.BinaryOperation)):  # `max(n + 1, 1.5)` still meets the float
        arg = ctx.parent(arg)
    call = ctx.parent(arg) if isinstance(arg, cst.Arg) else None
    return _max_with_float(call) if isinstance(call, cst.Call) else None


def _max_with_float(call: cst.Call) -> str | None:
    """The reason when ``call`` is Python's ``max``/``min`` with a float literal among its arguments."""
    if (isinstance(call.func, cst.Name) and call.func.value in ("max", "min")
            and any(_float_literal(a.value) for a in call.args)):
        return _FLOAT_MAX.format(call.func.value)
    return None


def _float_literal(expr: cst.BaseExpression) -> bool:
    expr = expr.operand if isinstance(expr, cst.UnaryOperation) else expr
    return isinstance(expr, cst.Float)


def _array_index(sub: cst.Subscript) -> bool:
    """``x[:, :n]``, ``x[..., i]``, ``x[None, i]``: an index only an array takes (a Python sequence takes one
    integer or slice)."""
    return len(sub.slice) > 1 or any(isinstance(e.slice, cst.Index) and (
        isinstance(e.slice.value, cst.Ellipsis) or code(e.slice.value) == "None") for e in sub.slice)


def _makes_number(node: cst.CSTNode) -> bool:
    """``node`` turns a tensor into Python numbers (``.item()``, ``.tolist()``, ``int(t)``); otherwise the
    captured value is a tensor, whose size may come from the data."""
    if not isinstance(node, cst.Call):
        return False
    if isinstance(node.func, cst.Attribute):
        return node.func.attr.value in {"item", "tolist"}
    return isinstance(node.func, cst.Name) and node.func.value in {"int", "float", "bool"}


def _call_problem(ctx: FileContext, call: cst.Call, unsized_list: bool) -> str | None:
    """A call inside the captured expression (traced with capture on)."""
    q = ctx.imports.qualify(call.func) or ""
    if q == CAPTURE_COUNTING_RANGE and _counts_from_zero(call):
        return None
    if q in CAPTURE_GUARDED_CALLS:
        return f"`{q}` must guard on a captured value to size its result"
    if _guarded_method(ctx, call):
        return f"`.{call.func.attr.value}()` must prove captured sizes match the tensor's elements"
    if unsized_list:
        return "the list of a tensor whose length is data-dependent has no length Dynamo can trace"
    return None


def _counts_from_zero(call: cst.Call) -> bool:
    """``torch.arange(n)`` or ``torch.arange(0, n)``; any keywords but the range's own."""
    if any(a.star or (a.keyword is not None and a.keyword.value in {"start", "end", "step"}) for a in call.args):
        return False
    positional = [a for a in call.args if a.keyword is None]
    if len(positional) == 2:
        first = positional[0].value
        return isinstance(first, cst.Integer) and first.evaluated_value == 0
    return len(positional) == 1


def _guarded_method(ctx: FileContext, call: cst.Call) -> bool:
    """``x.view(b, n)`` with a size that is not a literal (``x.reshape(-1)`` needs no captured value)."""
    return (isinstance(call.func, cst.Attribute) and call.func.attr.value in CAPTURE_GUARDED_METHODS
            and not _imported(ctx, call.func) and not all(_literal(a.value) for a in call.args))


def _receiver_is(call: cst.Call, method: str) -> bool:
    return isinstance(call.func, cst.Attribute) and call.func.attr.value == method


def _has_dynamic_op(ctx: FileContext, node: cst.CSTNode) -> bool:
    for sub in _walk(node):
        if isinstance(sub, cst.Call):
            q = ctx.imports.qualify(sub.func) or ""
            if q in DYNAMIC_SHAPE_TORCH or (isinstance(sub.func, cst.Attribute) and not _imported(ctx, sub.func)
                                            and sub.func.attr.value in DYNAMIC_SHAPE_METHODS):
                return True
            if q == "torch.where" and len(sub.args) == 1:
                return True
        if isinstance(sub, cst.Subscript) and not isinstance(ctx.parent(sub), cst.AssignTarget):
            if any(isinstance(e.slice, cst.Index) and isinstance(e.slice.value, cst.Comparison) for e in sub.slice):
                return True  # `x[x > 0]`
    return False


def _consumer_problem(ctx: FileContext, node: cst.CSTNode, sized: bool, depth: int,
                      holder: str | None = None) -> str | None:
    """Where the value of ``node`` goes once computed (``sized``: a tensor whose size may come from the
    data, not a number; ``holder``: the name ``node`` reads it from, a tensor)."""
    cur, parent = node, ctx.parent(node)
    reduced = False  # a reduction took away the data-dependent length (`x[m].sum()`)
    while True:  # what is still the captured value: arithmetic, a tuple of sizes, an element, a method's result
        if isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Not):
            break
        if isinstance(parent, cst.Attribute) and parent.value is cur:
            call = ctx.parent(parent)
            if not (isinstance(call, cst.Call) and call.func is parent):
                cur, parent = parent, call  # `idx.shape`
                continue
            if sized and parent.attr.value in {"tolist", "item", "numpy"}:
                return f"`.{parent.attr.value}()` of a tensor whose length is data-dependent"
            if sized and parent.attr.value in CAPTURE_GUARDED_METHODS:
                return f"`.{parent.attr.value}()` of a tensor whose length is data-dependent must check its size"
            reduced = reduced or _reduces_first_dim(call)
            cur, parent = call, ctx.parent(call)
            continue
        if isinstance(parent, (cst.BinaryOperation, cst.UnaryOperation, cst.Element, cst.Tuple, cst.List)) or (
                isinstance(parent, cst.Subscript) and parent.value is cur):
            cur, parent = parent, ctx.parent(parent)
            continue
        break
    if isinstance(parent, _BRANCHES) or isinstance(parent, cst.UnaryOperation):
        return "the captured value decides a branch, which Dynamo cannot trace on it"
    if isinstance(parent, cst.Arg):
        return _argument_problem(ctx, ctx.parent(parent), sized, depth)
    if isinstance(parent, (cst.Index, cst.Slice)):
        sub = next((a for a in ctx.ancestors(parent) if isinstance(a, cst.Subscript)), None)
        if sub is not None and not ctx.facts(ctx.enclosing_function(node)).is_tensor(sub.value) \
                and not _array_index(sub):
            return "the captured value indexes a Python sequence, which needs a concrete number"
        return None
    if isinstance(parent, (cst.Return, cst.Yield)):  # a tensor of data-dependent size is an ordinary output
        return None if sized else "the captured number is returned, and its caller may branch on it"
    if isinstance(parent, cst.For) and parent.iter is cur:
        return "the captured value is iterated"
    if isinstance(parent, cst.CompFor) and parent.iter is cur:
        return "a comprehension iterates over the captured value, whose length Dynamo cannot trace as a symbol"
    if sized and not reduced and _collected_by(parent, cur):
        return _collection_problem(ctx, parent, depth)
    if isinstance(parent, cst.AugAssign) and parent.target is cur:
        if sized:  # `mask *= keep`: a tensor updated in place, whose later reads are uses of the name
            return None
        if isinstance(cur, cst.Name):  # `n += 1`: the number's new value, followed like an assignment
            return _name_problem(ctx, parent, cur.value, sized, depth)
        return "the captured value is stored where this function cannot follow it"
    if isinstance(parent, (cst.Assign, cst.AugAssign)):
        target = parent.target if isinstance(parent, cst.AugAssign) else (
            parent.targets[0].target if len(parent.targets) == 1 else None)
        if isinstance(target, cst.Name):
            return _name_problem(ctx, parent, target.value, sized, depth)
        if isinstance(target, cst.Subscript) and (
                ctx.facts(ctx.enclosing_function(node)).is_tensor(target.value)
                or (sized and isinstance(target.value, cst.Name) and target.value.value == holder)):
            return None  # written into a tensor (`out[a:b] = v`; `m[..., :n] = m[..., :n].masked_fill(...)`)
        return "the captured value is stored where this function cannot follow it"
    if isinstance(parent, (cst.AnnAssign, cst.StarredElement)):
        return "the captured value is stored where this function cannot follow it"
    return None


def _argument_problem(ctx: FileContext, call: cst.BaseExpression, sized: bool, depth: int) -> str | None:
    if not isinstance(call, cst.Call):
        return None
    q = ctx.imports.qualify(call.func) or ""
    if q in CAPTURE_GUARDED_CALLS:
        return f"`{q}` must guard on a captured value to size its result"
    if _guarded_method(ctx, call):
        return f"`.{call.func.attr.value}()` must prove captured sizes match the tensor's elements"
    func = call.func
    builtin = func.value if isinstance(func, cst.Name) and func.value not in ctx.imports.names else ""
    floated = _max_with_float(call)
    if floated is not None:
        return floated
    if builtin in _NUMBER_BUILTINS:  # `int(n)`, `len(idx)`: a number still; where does it go?
        return _consumer_problem(ctx, call, sized, depth)
    if q.startswith("torch.") or builtin in _TYPE_QUERIES:  # `isinstance(t, EdgeIndex)` reads the type only
        return None
    if builtin == "range":
        return "the captured value is a loop's trip count"
    if sized and isinstance(func, cst.Attribute) and func.attr.value in _LIST_ADDS:
        return _appended_problem(ctx, call, depth)
    if isinstance(func, cst.Attribute) and not _imported(ctx, func) and not _is_self(func.value):
        return None  # a method of a tensor (`x.view(n)`)
    return f"the captured value is passed to `{code(func)}`, which may branch on it"


def _imported(ctx: FileContext, func: cst.BaseExpression) -> bool:
    """``func`` is reached through an import (``torch.where``, ``np.flatnonzero``), not a local value."""
    while isinstance(func, cst.Attribute):
        func = func.value
    return isinstance(func, cst.Name) and func.value in ctx.imports.names


def _is_self(expr: cst.BaseExpression) -> bool:
    while isinstance(expr, cst.Attribute):
        expr = expr.value
    return isinstance(expr, cst.Name) and expr.value in {"self", "cls"}


def _name_problem(ctx: FileContext, assign: cst.CSTNode, name: str, sized: bool, depth: int,
                  collection: bool = False) -> str | None:
    """The uses of ``name``, assigned the captured value by ``assign`` (``collection``: a list that
    ``assign`` put captured tensors into)."""
    func = ctx.enclosing_function(assign)
    facts = ctx.facts(func)
    if depth > 5:
        return f"`{name}` flows too far to follow"
    end = ctx.positions[assign].end
    loop = next((a for a in ctx.ancestors(assign) if isinstance(a, (cst.For, cst.While, cst.FunctionDef))), None)
    for use in facts.loads.get(name, []):
        pos = ctx.positions[use].start
        if (pos.line, pos.column) < (end.line, end.column) and not (
                isinstance(loop, (cst.For, cst.While)) and loop in ctx.ancestors(use)
                and assign not in ctx.ancestors(use)):
            continue  # an earlier value of the name (a use later in the same loop may read this one)
        if ctx.enclosing_function(use) is not func:
            return f"`{name}` is used in a nested function"
        problem = _collection_problem(ctx, use, depth + 1) if collection else \
            _consumer_problem(ctx, use, sized, depth + 1, name if sized else None)
        if problem:
            return f"`{name}`: {problem}"
    return None


# list methods that put a value into the list (``extend`` iterates its argument)
_LIST_ADDS = frozenset({"append", "insert", "extend"})
_COMPREHENSIONS = (cst.ListComp, cst.SetComp, cst.GeneratorExp)
# reductions whose result has no data-dependent length left when they reduce everything or the first dimension
_REDUCTIONS = frozenset({"sum", "mean", "amax", "amin", "max", "min", "prod", "any", "all", "norm", "std", "var",
                         "count_nonzero", "logsumexp"})


def _reduces_first_dim(call: cst.Call) -> bool:
    """``t.sum()``, ``t.mean(0)``, ``t.amax(dim=0)``: the captured tensor's data-dependent first dimension
    (the one ``nonzero``, ``unique``, a mask and ``repeat_interleave`` make) is reduced away."""
    if not (isinstance(call.func, cst.Attribute) and call.func.attr.value in _REDUCTIONS):
        return False
    dims = [a for a in call.args if a.keyword is None or a.keyword.value == "dim"]
    return not dims or (len(dims) == 1 and code(dims[0].value) in {"0", "(0,)", "[0]"})


def _collected_by(parent: cst.CSTNode | None, cur: cst.CSTNode) -> bool:
    """``cur`` is each element a comprehension ``parent`` makes."""
    return (isinstance(parent, _COMPREHENSIONS) and parent.elt is cur) or (
        isinstance(parent, cst.DictComp) and parent.value is cur)


def _appended_problem(ctx: FileContext, call: cst.Call, depth: int) -> str | None:
    """``L.append(v)`` with ``v`` the captured tensor: where the list ``L`` goes."""
    func = call.func
    if func.attr.value == "extend":
        return "`.extend()` iterates over the captured value, whose length Dynamo cannot trace as a symbol"
    if not isinstance(func.value, cst.Name):
        return f"the captured value is put into `{code(func.value)}`, which this function cannot follow"
    return _name_problem(ctx, call, func.value.value, True, depth, collection=True)


def _collection_problem(ctx: FileContext, node: cst.CSTNode, depth: int) -> str | None:
    """Where ``node``, a list of captured tensors (a comprehension's, or a name of one), goes. Each tensor has
    a data-dependent length of its own: joined along that dimension, counted, returned or added to they
    stay in the graph; a call that compares the lengths (``pad_sequence``) breaks there instead."""
    parent = ctx.parent(node)
    if isinstance(parent, cst.Attribute) and parent.value is node and parent.attr.value in _LIST_ADDS:
        return None  # more elements, followed where they are added
    if isinstance(parent, cst.Arg) and isinstance(ctx.parent(parent), cst.Call):
        call = ctx.parent(parent)
        q = ctx.imports.qualify(call.func) or ""
        builtin = call.func.value if isinstance(call.func, cst.Name) and call.func.value not in ctx.imports.names \
            else ""
        if (q in CAPTURE_LIST_JOINS and _joined_along_first_dim(call)) or builtin == "len":
            return None
        return (f"the captured tensors, each of a data-dependent length, are collected in a list that goes to "
                f"`{code(call.func)}`, which compares their lengths: the graph would break there instead")
    if isinstance(parent, cst.Return):
        return None
    if isinstance(parent, cst.Subscript) and parent.value is node:
        return _consumer_problem(ctx, parent, True, depth + 1)
    if isinstance(parent, (cst.For, cst.CompFor)) and parent.iter is node:
        return "the list of captured tensors, each of a data-dependent length, is iterated, which mend does not follow"
    if isinstance(parent, cst.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0].target, cst.Name):
        return _name_problem(ctx, parent, parent.targets[0].target.value, True, depth, collection=True)
    return "the list of captured tensors is stored where this function cannot follow it"


def _joined_along_first_dim(call: cst.Call) -> bool:
    """``torch.cat(L)``, ``torch.cat(L, 0)``, ``torch.cat(L, dim=0)``."""
    dims = [a for a in call.args[1:] if a.keyword is None or a.keyword.value == "dim"]
    return not dims or (len(dims) == 1 and code(dims[0].value) == "0")


def _walk(node: cst.CSTNode):
    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        if not isinstance(n, (cst.Lambda, cst.FunctionDef, cst.ClassDef)) or n is node:
            stack.extend(children(n))


def _decorator_plan(ctx: FileContext, diag: Diagnostic, func: cst.FunctionDef, flag: str, why: str) -> Plan:
    torch, imports = ctx.torch_name()

    def add(upd: cst.FunctionDef) -> cst.FunctionDef:
        decos = list(upd.decorators)
        for i, d in enumerate(decos):
            dec = d.decorator
            if isinstance(dec, cst.Call) and code(dec.func).endswith("_dynamo.config.patch"):
                if flag in code(dec):
                    return upd
                args = list(dec.args)
                args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                args.append(cst.Arg(keyword=cst.Name(flag), value=cst.Name("True"),
                                    equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                                          whitespace_after=cst.SimpleWhitespace(""))))
                decos[i] = d.with_changes(decorator=dec.with_changes(args=args))
                return upd.with_changes(decorators=decos)
        new = cst.Decorator(decorator=parse_expr(f"{torch}._dynamo.config.patch({flag}=True)"))
        compiled_at = [i for i, d in enumerate(decos) if "compile" in code(d.decorator)]
        if compiled_at:  # wrap the compiled function, so the patch is active while Dynamo traces it
            i = compiled_at[0]
            return upd.with_changes(decorators=decos[:i] + [new] + decos[i:])
        return upd.with_changes(decorators=decos + [new])

    return Plan(diag, f"enable {flag} for `{func.name.value}` only ({why})", "unsafe", [(func, add)],
                imports=imports, fallback=True)


def _qualified(ctx: FileContext, dec: cst.BaseExpression) -> str:
    """The qualified name of a decorator (``@torch.jit.script``, ``@torch.compile(...)``), or ""."""
    return ctx.imports.qualify(dec.func if isinstance(dec, cst.Call) else dec) or ""


def _compile_decorator(ctx: FileContext, dec: cst.BaseExpression) -> bool:
    """``@torch.compile`` / ``@torch.compile(...)`` (or ``compile`` imported from torch)."""
    return _qualified(ctx, dec) in COMPILE_NAMES


__all__ = ["capture_plan", "lambda_plan", "not_liftable", "tensor_check_plan"]
