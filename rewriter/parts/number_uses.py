"""Where the numbers of a shape tensor may be read as Python ints instead (the kept-values repair's check).

Under compile the repair hands code Python ints where eager has 0-d integer tensors of the same values.
:func:`check_uses` follows each expression that holds such a number (through the names that hold it, the
parameters of the functions it is passed to and the ``self.`` attributes it is stored to) and raises
:class:`NotKept` with the reason at the first use where the two act differently; the strategy
(:mod:`mend.rewriter.strategies.kept_values`) declines with that reason."""

from __future__ import annotations

import libcst as cst

from mend.rewriter.analysis import FunctionFacts, all_params, code, self_attr, strip_parens, walk
from mend.rewriter.context import FileContext

# operators under which a Python int and a 0-d int64 tensor give the same number
SAME_OPS = (cst.Add, cst.Subtract, cst.Multiply, cst.FloorDivide, cst.Modulo)


class NotKept(Exception):
    """A use of the numbers where a Python int and a 0-d tensor act differently (the message says which)."""


def written_names(node: cst.CSTNode, methods: frozenset[str] = frozenset()) -> set[str]:
    """Names written in place under ``node``: ``x.add_(1)``, ``x[i] = v``, ``x += v``, and ``x.<m>(...)`` for
    ``m`` in ``methods``."""
    out = set()
    for n in walk(node):
        target = None
        if isinstance(n, cst.Call) and isinstance(n.func, cst.Attribute) and (
                n.func.attr.value in methods
                or n.func.attr.value.endswith("_") and not n.func.attr.value.endswith("__")):
            target = n.func.value
        elif isinstance(n, cst.AugAssign):
            target = n.target
        elif isinstance(n, cst.AssignTarget) and isinstance(n.target, cst.Subscript):
            target = n.target.value
        while isinstance(target, cst.Subscript):
            target = target.value
        if isinstance(target, cst.Name):
            out.add(target.value)
    return out


def functions_of(ctx: FileContext) -> list[cst.FunctionDef]:
    return ctx.memo("kept_values.functions", lambda: [n for n in ctx.parents if isinstance(n, cst.FunctionDef)])


def positional(ctx: FileContext, functions: list[cst.FunctionDef], call: cst.Call,
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



def check_uses(ctx: FileContext, func: cst.FunctionDef, users: list[cst.BaseExpression],
                rounded: str | None = None) -> set[tuple]:
    """Raise :class:`NotKept` unless each expression holding a number is used where a Python int and a 0-d
    int64 tensor act alike; followed through the names that hold the numbers, the parameters of the
    functions they are passed to and the ``self.`` attributes they are stored to. ``rounded`` names the
    division the numbers went through, if any (:func:`_sink`). Returns those holders: (function, name) and
    (class, ``self.`` attribute)."""
    seen: set[tuple] = set()
    work = [(func, expr, rounded) for expr in users]
    while work:
        where, expr, how = work.pop()
        if ctx.eager_only(expr):
            continue  # eager reads the tensor there: the copy is read only under compile
        for holder in _sink(ctx, where, expr, how):
            if holder not in seen:
                seen.add(holder)
                work += [(f, e, holder[2]) for f, e in _reads_of(ctx, holder)]
    return {h[:2] for h in seen}


def _reads_of(ctx: FileContext, holder: tuple) -> list[tuple[cst.FunctionDef, cst.BaseExpression]]:
    scope, name = holder[:2]
    if isinstance(scope, cst.FunctionDef):
        return [(scope, n) for n in walk(scope.body) if isinstance(n, cst.Name) and n.value == name
                and is_load(ctx, n)]
    return [(method, n) for method in walk(scope.body) if isinstance(method, cst.FunctionDef)
            for n in walk(method.body) if self_attr(n) == name and _is_load_attr(ctx, n)]


def _sink(ctx: FileContext, func: cst.FunctionDef, expr: cst.BaseExpression, rounded: str | None) -> list[tuple]:
    """Climb from ``expr`` (a number) to where its value ends; the holders it is stored to or passed to, each
    with the division its value went through (``rounded``): a quotient or power of the numbers is a float64
    in Python where the tensor's was float32, the same value rounded apart, so it may only meet tensors or
    be stored and passed on (where the same holds), never decide a size, an index or a test."""
    facts = ctx.facts(func)
    cur = expr
    while True:
        parent = ctx.parent(cur)
        if isinstance(parent, cst.BinaryOperation):
            other = parent.right if parent.left is cur else parent.left
            if _is_tensor(facts, other):
                return []  # a tensor op: an int and a 0-d int64 tensor promote alike
            if not isinstance(parent.operator, SAME_OPS):
                rounded = rounded or code(parent)
        elif isinstance(parent, cst.UnaryOperation) and isinstance(parent.operator, cst.Minus):
            pass
        elif isinstance(parent, cst.IfExp) and parent.test is not cur:
            pass  # a side of ``a if c else b``: the value is the number or the other side's
        elif isinstance(parent, cst.Subscript) and parent.value is cur:
            pass  # ``shapes[i]`` further indexed: the outer subscript is the number
        elif isinstance(parent, (cst.Element, cst.List, cst.Tuple, cst.ListComp, cst.GeneratorExp)):
            pass  # inside a list of sizes: its use decides
        elif isinstance(parent, cst.Arg) and _extreme(ctx.parent(parent)):
            parent = ctx.parent(parent)  # ``max(n, m)`` of numbers: the larger number, either way
        else:
            if rounded is not None and not _carries(ctx, cur, parent):
                raise NotKept(f"`{rounded}` divides or raises it to a power (float64 in Python, float32 on "
                              f"the tensor), and `{code(parent)[:60]}` uses the result as a number")
            return [(*h, rounded) for h in _end(ctx, func, cur, parent, rounded)]
        cur = parent


def _carries(ctx: FileContext, cur: cst.CSTNode, parent: cst.CSTNode | None) -> bool:
    """``parent`` stores ``cur`` to a name or attribute or passes it to a function: its uses decide."""
    if isinstance(parent, (cst.AugAssign, cst.Assign)):
        return parent.value is cur
    return isinstance(parent, cst.Arg) and not _sizes_call(ctx, ctx.parent(parent))


def _end(ctx: FileContext, func: cst.FunctionDef, cur: cst.CSTNode, parent: cst.CSTNode | None,
         rounded: str | None) -> list[tuple]:
    """Where the number ``cur`` ends in ``parent``: nothing more to check ([]), the holders whose reads are
    checked next, or :class:`NotKept`."""
    if isinstance(parent, (cst.Index, cst.Slice)):
        return []  # an index or a slice bound takes either alike
    if isinstance(parent, (cst.Comparison, cst.ComparisonTarget)):
        return _check_truth(ctx, func, parent if isinstance(parent, cst.Comparison) else ctx.parent(parent))
    if isinstance(parent, cst.BooleanOperation) or (isinstance(parent, cst.UnaryOperation)
                                                    and isinstance(parent.operator, cst.Not)):
        return _check_truth(ctx, func, cur)  # its truth: alike for an int and a 0-d tensor
    if isinstance(parent, (cst.If, cst.While, cst.IfExp, cst.Assert)) and parent.test is cur:
        return []
    if isinstance(parent, cst.Arg):
        call = ctx.parent(parent)
        return [] if _sizes_call(ctx, call) else _passed(ctx, call, parent, rounded)
    if isinstance(parent, (cst.AugAssign, cst.Assign)) and parent.value is cur:
        targets = [parent.target] if isinstance(parent, cst.AugAssign) else [t.target for t in parent.targets]
        if len(targets) == 1 and isinstance(targets[0], cst.Name):
            return [(func, targets[0].value)]
        cls = ctx.enclosing_class(func)
        if len(targets) == 1 and self_attr(targets[0]) is not None and cls is not None:
            return [(cls, self_attr(targets[0]))]
        raise NotKept(f"it is stored to `{code(targets[0])}`")
    if isinstance(parent, (cst.AssignTarget, cst.For, cst.CompFor)):
        return []
    raise NotKept(f"`{code(parent)[:60]}` uses it as a tensor")


def _extreme(call: cst.CSTNode | None) -> bool:
    return isinstance(call, cst.Call) and code(call.func) in ("max", "min") and len(call.args) >= 2 \
        and all(a.keyword is None and not a.star for a in call.args)


_PLAIN_DECORATORS = frozenset({"staticmethod", "classmethod"})
_DICT_WRITES = frozenset({"update", "setdefault", "pop", "popitem", "clear", "__setitem__"})
_CHECKING: set[tuple] = set()  # the functions of other modules whose uses are being checked (:func:`_passed`)


def _passed(ctx: FileContext, call: cst.Call, arg: cst.Arg, rounded: str | None) -> list[tuple]:
    """The parameters of the file's functions a number is passed to: by keyword from a call of a function
    of the file or through ``self.`` (a method or a submodule: every function of the file with that
    parameter); by position as the reached tensors are (:func:`positional`). A call of a function stored
    on ``self`` (:func:`_stored_callees`), whose functions may be in a module beside this one, has their
    uses checked there."""
    functions = functions_of(ctx)
    i = next(k for k, a in enumerate(call.args) if a is arg)
    if arg.star:
        targets = []
    elif arg.keyword is not None:
        name = arg.keyword.value
        if isinstance(call.func, cst.Name):
            functions = [f for f in functions if f.name.value == call.func.value]
        elif not (isinstance(call.func, cst.Attribute) and code(call.func).startswith(("self.", "cls."))):
            functions = []
        targets = [(f, name) for f in functions if name in {p.name.value for p in all_params(f.params)}]
    elif all(a.keyword is None and not a.star for a in call.args[:i]):
        targets = positional(ctx, functions, call, i)
    else:
        targets = []
    stored = [] if targets or arg.star else _stored_callees(ctx, call, arg, i)
    if not targets and not stored:
        raise NotKept(f"`{code(call)[:60]}` may treat it as a tensor")
    for where, f, param in [(ctx, f, p) for f, p in targets] + stored:
        wrapped = [code(d.decorator) for d in f.decorators if code(d.decorator) not in _PLAIN_DECORATORS
                   and where.imports.qualify(d.decorator) != "torch.jit.script"]
        if wrapped:  # ``@torch.jit.script`` is traced as Python by Dynamo; the copy is read only there
            raise NotKept(f"`{f.name.value}` is wrapped by `@{wrapped[0]}`, which may not take a Python number")
        if where is not ctx and (key := (where.path, id(f), param, rounded)) not in _CHECKING:
            _CHECKING.add(key)  # a module beside that passes the number back here is not checked twice
            try:
                check_uses(where, f, [e for _, e in _reads_of(where, (f, param))], rounded)
            finally:
                _CHECKING.discard(key)
    return [(f, p) for where, f, p in stored if where is ctx] + targets


def _stored_callees(ctx: FileContext, call: cst.Call, arg: cst.Arg, i: int) -> list[tuple]:
    """``self.init_fn(config, n)`` where every ``self.init_fn = ...`` of the class stores a function or an
    entry of a dict of functions (``ROPE_INIT_FUNCTIONS[self.rope_type]``), of this module or imported from
    one beside it: (the function's module, the function, the parameter ``arg`` binds) for each; [] where one
    store or function is not known."""
    attr, cls = self_attr(call.func), ctx.enclosing_class(call)
    if attr is None or cls is None:
        return []
    stored = [n.value for n in walk(cls.body) if isinstance(n, cst.Assign) and len(n.targets) == 1
              and self_attr(n.targets[0].target) == attr]
    out = []
    for value in stored:
        entry = isinstance(value, cst.Subscript)
        name = value.value if entry else value
        found = _module_functions(ctx, name.value, entry) if isinstance(name, cst.Name) else None
        if not found:
            return []
        for where, f in found:
            params = list(f.params.posonly_params) + list(f.params.params)
            names = [p.name.value for p in params]
            param = arg.keyword.value if arg.keyword is not None else (names[i] if i < len(names) else None)
            if param not in names and not (arg.keyword is not None and param in
                                           {p.name.value for p in f.params.kwonly_params}):
                return []
            out.append((where, f, param))
    return out


def _module_functions(ctx: FileContext, name: str, entry: bool) -> list[tuple] | None:
    """The top-level function ``name`` (``entry``: every function of the top-level dict ``name``) of this
    module, or of the module beside it that ``name`` is imported from: [(module, function)], or None."""
    where, own = ctx, name
    if not _top_level(ctx, name):
        imported = ctx.imported(name)
        if imported is None:
            return None
        where, own = imported
    node = _top_level(where, own)
    if isinstance(node, cst.FunctionDef) and not entry:
        return [(where, node)]
    if not (entry and isinstance(node, cst.Dict)) or _changed_table(where, own) or _changed_table(ctx, name):
        return None
    values = [strip_parens(e.value) for e in node.elements]
    funcs = [_top_level(where, v.value) if isinstance(v, cst.Name) else None for v in values]
    if not funcs or any(not isinstance(f, cst.FunctionDef) for f in funcs):
        return None
    return [(where, f) for f in funcs]


def _changed_table(ctx: FileContext, name: str) -> bool:
    """The module writes entries into the dict ``name`` (``name[k] = f``, ``name.update(...)``): its
    functions are not only those it is built with."""
    return name in ctx.memo("kept_values.tables_written", lambda: written_names(ctx.module, _DICT_WRITES))


def _top_level(ctx: FileContext, name: str) -> cst.CSTNode | None:
    """The top-level ``def name`` of the module, or the value of its one top-level ``name = ...``."""
    found = []
    for stmt in ctx.module.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == name:
            found.append(stmt)
        elif isinstance(stmt, cst.SimpleStatementLine):
            found += [s.value for s in stmt.body if isinstance(s, cst.Assign) and len(s.targets) == 1
                      and isinstance(s.targets[0].target, cst.Name) and s.targets[0].target.value == name]
    return found[0] if len(found) == 1 else None


def _is_tensor(facts: FunctionFacts, expr: cst.BaseExpression) -> bool:
    """A tensor, or indexed as only an array is (``x[:, None, i]``, ``x[None]``)."""
    expr = strip_parens(expr)
    if isinstance(expr, cst.Subscript):
        parts = [e.slice for e in expr.slice]
        if len(parts) > 1 or any(not isinstance(p, cst.Index) or isinstance(p.value, cst.Ellipsis)
                                 or code(p.value) == "None" for p in parts):
            return True
    return facts.is_tensor(expr)


def _check_truth(ctx: FileContext, func: cst.FunctionDef, test: cst.CSTNode) -> list[tuple]:
    """A comparison of the numbers is a Python bool where it was a bool tensor: alike as a test, or stored
    to a name whose reads are alike (``use_cached = a and n > 0``, then ``if use_cached:``); the name, then."""
    cur = test
    while isinstance(parent := ctx.parent(cur), (cst.BooleanOperation, cst.UnaryOperation)):
        cur = parent
    if isinstance(parent, (cst.If, cst.While, cst.IfExp, cst.Assert)) and parent.test is cur:
        return []
    if isinstance(parent, cst.Arg) and _bool_tensor_of(ctx, ctx.parent(parent)):
        return []  # ``torch.as_tensor(n % k != 0)`` (a validation repair's check): the same bool tensor
    stored = _stored_name(parent, cur)
    if stored is None:
        raise NotKept(f"the comparison `{code(test)}` is used as a value, not a test")
    return [(func, stored)]


def _bool_tensor_of(ctx: FileContext, call: cst.CSTNode | None) -> bool:
    """``torch.as_tensor(<one positional argument>)``: a Python bool and a bool tensor give equal tensors."""
    return isinstance(call, cst.Call) and ctx.imports.qualify(call.func) == "torch.as_tensor" \
        and len(call.args) == 1 and call.args[0].keyword is None and not call.args[0].star


def _sizes_call(ctx: FileContext, call: cst.Call) -> bool:
    """A torch function or a tensor method (``x.view(...)``): they take a Python int where a 0-d tensor was."""
    qual = ctx.imports.qualify(call.func) or ""
    if qual.startswith("torch.") or code(call.func) in ("range", "int", "float"):
        return True
    return isinstance(call.func, cst.Attribute) and not (ctx.imports.qualify(call.func.value) or "").startswith(
        ("math", "numpy", "builtins")) and code(call.func.value) not in ("self", "cls")


def _is_load_attr(ctx: FileContext, attr: cst.Attribute) -> bool:
    parent = ctx.parent(attr)
    return not (isinstance(parent, cst.AssignTarget) or (isinstance(parent, cst.AugAssign) and parent.target is attr))


def is_load(ctx: FileContext, name: cst.Name) -> bool:
    parent = ctx.parent(name)
    if isinstance(parent, cst.AssignTarget) or (isinstance(parent, cst.AugAssign) and parent.target is name):
        return False
    if isinstance(parent, cst.Attribute) and parent.attr is name:
        return False
    return not (isinstance(parent, cst.Arg) and parent.keyword is name)


def _stored_name(stmt: cst.CSTNode | None, value: cst.CSTNode) -> str | None:
    """The name ``value`` is assigned to (``name = value``), else None."""
    if isinstance(stmt, cst.Assign) and stmt.value is value and len(stmt.targets) == 1 \
            and isinstance(stmt.targets[0].target, cst.Name):
        return stmt.targets[0].target.value
    return None
