"""LayerDrop's test, read and guarded (no torch import): ``u = torch.rand([])`` then ``if u < p:``.

:func:`guard` proves each part of the test (a one-element draw from ``[0, 1)`` bound once just before it, a strict
comparison, a bound proven a number) and plans ``p > 0 and u < p``; the strategies ``layerdrop_guard`` (safe) and
``layerdrop_select`` (unsafe, under compile) build on it.
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import DRAWN_HELPER
from mend.rewriter.analysis import all_params, code, is_number, make_call, names_in, self_attr, strip_parens, walk
from mend.rewriter.context import FileContext
from mend.rewriter.parts.sites import branch_node
from mend.rewriter.plan import Decline, Plan

_SIZES = {"[]", "()", "1", "[1]", "(1,)", "(1)"}
_KEYWORDS = {"generator", "device", "requires_grad", "dtype"}
_REAL_DTYPES = {"torch.float", "torch.float32", "torch.float64", "torch.double", "torch.float16", "torch.half",
                "torch.bfloat16"}


def guard(ctx: FileContext, diag: Diagnostic) -> Plan | Decline | None:
    """The LayerDrop guard's plan for the test at ``diag`` (:mod:`mend.rewriter.strategies.layerdrop_guard`):
    its first edit puts ``p > 0 and`` before the draw's test; None where the test is not LayerDrop's."""
    node = branch_node(ctx, diag)
    if isinstance(node, Decline):
        return node
    *prefix, last = _and_operands(node.test)
    if not all(_plain(p) for p in prefix):
        return None  # an operand before the draw's test that may itself be a tensor test
    test = strip_parens(last)
    if not (isinstance(test, cst.Comparison) and len(test.comparisons) == 1):
        return None
    op, right = test.comparisons[0].operator, test.comparisons[0].comparator
    if isinstance(op, cst.LessThan):
        draw, bound = test.left, right
    elif isinstance(op, cst.GreaterThan):
        draw, bound = right, test.left
    else:
        return None
    call = _draw(ctx, node, draw.value) if isinstance(draw, cst.Name) else None
    if call is None:
        return None
    why = _not_a_number(ctx, node, bound)
    if why:
        return Decline(diag, f"LayerDrop test `{code(test)}`: {why}", final=False)
    guard = cst.Comparison(left=bound, comparisons=[cst.ComparisonTarget(
        operator=cst.GreaterThan(), comparator=cst.Integer("0"))])
    # `self.training and (u < p)` -> `self.training and p > 0 and (u < p)`: read for its truth only, where
    # `p > 0` is False `u < p` is too
    old = last if prefix else node.test
    edits = [(old, cst.BooleanOperation(left=guard, operator=cst.And(), right=old))]
    if ctx.imports.qualify(call.func) == "random.uniform":  # Dynamo draws it before the graph, read or not
        return Plan(diag, f"LayerDrop: `{code(bound)} > 0 and ...` (a `random.uniform(0, 1)` draw is never below a "
                          f"bound <= 0; the draw is kept: Dynamo makes it before the graph runs){_WHERE}", "safe", edits,
                    keeps_break=KEEPS_BREAK)
    if _wrapped(ctx.parent(ctx.parent(call))) is not call:  # the draw stays in a graph that no longer reads it
        edits.append((call, make_call(DRAWN_HELPER, call)))
    return Plan(diag, f"LayerDrop: `{code(bound)} > 0 and ...` (a `torch.rand` draw is never below a bound <= 0; "
                      f"the draw is kept, also in a compiled graph: `{DRAWN_HELPER}`){_WHERE}", "safe", edits,
                helpers=[DRAWN_HELPER], keeps_break=KEEPS_BREAK)


# where the guard leaves its break, by design: the test still breaks the graph in training where p > 0 (a safe
# repair cannot select a layer's output: a dropped layer's parameters would get zero gradients, not None). The
# plan says so (``Plan.keeps_break``); the corpus report lists such sites apart from repairs that failed.
KEEPS_BREAK = "in training where the probability is above 0"
_WHERE = (f"; the break goes where the probability is 0, and stays {KEEPS_BREAK} (`--unsafe-fixes` selects the "
          f"layer's output under compile where it can)")


def _and_operands(test: cst.BaseExpression) -> list[cst.BaseExpression]:
    """The operands of an ``and`` chain in order, through parentheses (``[test]`` for any other test)."""
    bare = strip_parens(test)
    if isinstance(bare, cst.BooleanOperation) and isinstance(bare.operator, cst.And):
        return _and_operands(bare.left) + _and_operands(bare.right)
    return [test]


def _plain(operand: cst.BaseExpression) -> bool:
    """``self.training`` (an attribute chain of ``self``, maybe under ``not``): a mode, not a tensor test."""
    e = strip_parens(operand)
    if isinstance(e, cst.UnaryOperation) and isinstance(e.operator, cst.Not):
        e = strip_parens(e.expression)
    if not isinstance(e, cst.Attribute):
        return False
    while isinstance(e, cst.Attribute):
        e = e.value
    return isinstance(e, cst.Name) and e.value == "self"


def _draw(ctx: FileContext, node: cst.CSTNode, name: str) -> cst.Call | None:
    """The draw from ``[0, 1)`` (:func:`_uniform_draw`) ``name`` is bound to, once in the function, in the block
    of ``node`` (an ``if``, or the statement of a conditional expression) before it and not mentioned in
    between; else None."""
    func = ctx.enclosing_function(node)
    if func is None:
        return None
    stores = ctx.facts(func).stores.get(name, [])
    if len(stores) != 1 or not isinstance(stores[0], cst.Assign) or len(stores[0].targets) != 1:
        return None
    assign = stores[0]
    call = assign.value
    call = _wrapped(call) or call
    if not (isinstance(assign.targets[0].target, cst.Name) and isinstance(call, cst.Call)
            and _uniform_draw(ctx, call)):
        return None
    line = ctx.parent(assign)
    stmt = node if isinstance(node, cst.If) else ctx.statement_line(node)
    block = ctx.parent(line) if line is not None else None
    if stmt is None or not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1 \
            or not isinstance(block, cst.IndentedBlock) or ctx.parent(stmt) is not block:
        return None
    body = list(block.body)
    start, end = _index(body, line), _index(body, stmt)
    if start is None or end is None or start >= end:
        return None
    if any(name in names_in(s) for s in body[start + 1:end]):
        return None
    return call


def _wrapped(value: cst.BaseExpression) -> cst.BaseExpression | None:
    """The draw inside ``_mend_drawn(draw)`` (a draw an earlier run wrapped); else None."""
    if isinstance(value, cst.Call) and isinstance(value.func, cst.Name) and value.func.value == DRAWN_HELPER \
            and len(value.args) == 1 and value.args[0].keyword is None and not value.args[0].star:
        return value.args[0].value
    return None


def _index(body: list, node: cst.CSTNode) -> int | None:
    return next((i for i, s in enumerate(body) if s is node), None)


def _uniform_draw(ctx: FileContext, call: cst.Call) -> bool:
    """``torch.rand`` of one element, or Python's ``random.uniform(0, 1)`` (``0 + (1 - 0) * random()``: a
    number of ``[0, 1)``, which Dynamo traces as an input of the graph)."""
    q = ctx.imports.qualify(call.func)
    if q == "random.uniform":
        return [code(a.value) for a in call.args if a.keyword is None and not a.star] in (
            [lo, hi] for lo in ("0", "0.0") for hi in ("1", "1.0")) and len(call.args) == 2
    return q == "torch.rand" and _one_element(ctx, call)


def _one_element(ctx: FileContext, call: cst.Call) -> bool:
    """``torch.rand([])`` (``()``, ``1``, ``[1]``, ``(1,)``), with only harmless keywords: a real floating
    tensor of one element, all of whose values are >= 0."""
    positional = [a for a in call.args if a.keyword is None]
    if len(positional) != 1 or positional[0].star or code(positional[0].value).replace(" ", "") not in _SIZES:
        return False
    for arg in call.args:
        if arg.keyword is None:
            continue
        if arg.keyword.value not in _KEYWORDS:
            return False
        if arg.keyword.value == "dtype" and ctx.imports.qualify(arg.value) not in _REAL_DTYPES:
            return False
    return True


def _not_a_number(ctx: FileContext, node: cst.CSTNode, bound: cst.BaseExpression) -> str | None:
    """None when ``bound`` is proven a Python number the test reads twice without effects; else why not."""
    func = ctx.enclosing_function(node)
    attr = self_attr(bound)
    config = isinstance(bound, cst.Attribute) and self_attr(bound.value) == "config"
    if attr is not None or config:
        cls = ctx.enclosing_class(func) if func is not None else None
        if cls is None:
            return "`self` outside a class"
        return _config_object(ctx, cls) if config else _number_attribute(ctx, cls, attr)
    if isinstance(bound, cst.Name) and func is not None:
        param = next((p for p in all_params(func.params) if p.name.value == bound.value), None)
        if param is None or not _number_param(ctx, param) or ctx.facts(func).stores.get(bound.value):
            return f"cannot prove `{bound.value}` is a number (a parameter with a number default or annotation)"
        return None
    return "the bound is not a name or a `self.` attribute"


def _number_attribute(ctx: FileContext, cls: cst.ClassDef, attr: str) -> str | None:
    values: list[tuple[cst.BaseExpression | None, cst.FunctionDef | None]] = []
    for stmt in cls.body.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == attr:
            return f"the class defines `{attr}` (a property is read twice)"
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                targets = small.targets if isinstance(small, cst.Assign) else (
                    [small] if isinstance(small, cst.AnnAssign) else [])
                if any(isinstance(t.target, cst.Name) and t.target.value == attr for t in targets):
                    return f"the class defines `{attr}`"
    for method in (s for s in cls.body.body if isinstance(s, cst.FunctionDef)):
        for node in walk(method.body):
            if isinstance(node, cst.Assign):
                if any(self_attr(t.target) == attr for t in node.targets):
                    values.append((node.value, method))
                elif any(attr in code(t.target) for t in node.targets if not isinstance(t.target, cst.Name)):
                    return f"`self.{attr}` is bound in a form not followed"
            elif isinstance(node, (cst.AugAssign, cst.AnnAssign)) and self_attr(node.target) == attr:
                values.append((None, method))
    if not values:
        return f"no assignment of `self.{attr}` in the class"
    for value, method in values:
        if value is None or not _number_value(ctx, value, method):
            return f"cannot prove `self.{attr}` holds a number (`{code(value) if value is not None else '...'}`)"
    return None


def _config_object(ctx: FileContext, cls: cst.ClassDef) -> str | None:
    """None when every assignment of ``self.config`` in the class is the method's ``config`` parameter
    (wav2vec2's ``self.config.layerdrop``: a configuration number, trusted as ``config.X`` is); else why not."""
    if any(isinstance(s, cst.FunctionDef) and s.name.value == "config" for s in cls.body.body):
        return "the class defines `config` (a property is read twice)"
    found = False
    for method in (s for s in cls.body.body if isinstance(s, cst.FunctionDef)):
        for node in walk(method.body):
            targets = node.targets if isinstance(node, cst.Assign) else (
                [node] if isinstance(node, (cst.AugAssign, cst.AnnAssign)) else [])
            if not any(self_attr(t.target) == "config" for t in targets):
                continue
            value = node.value if isinstance(node, cst.Assign) else None
            if not (isinstance(value, cst.Name) and value.value == "config"
                    and any(p.name.value == "config" for p in all_params(method.params))
                    and not ctx.facts(method).stores.get("config")):
                return f"cannot prove `self.config` is the configuration (`{code(node)}`)"
            found = True
    return None if found else "no assignment of `self.config` in the class"


def _number_value(ctx: FileContext, value: cst.BaseExpression, method: cst.FunctionDef) -> bool:
    if is_number(value):
        return True
    params = {p.name.value: p for p in all_params(method.params)}
    if isinstance(value, cst.Name):
        param = params.get(value.value)
        return param is not None and _number_param(ctx, param) and not ctx.facts(method).stores.get(value.value)
    if isinstance(value, cst.Attribute) and isinstance(value.value, cst.Name):
        return value.value.value == "config" and "config" in params  # transformers: a configuration number
    if isinstance(value, cst.Call) and code(value.func) == "getattr" and len(value.args) == 3 \
            and "getattr" not in ctx.imports.names:  # flaubert: `getattr(config, "layerdrop", 0.0)`
        obj, name, default = (a.value for a in value.args)
        return code(obj) == "config" and "config" in params and isinstance(name, cst.SimpleString) \
            and is_number(default) and all(a.keyword is None and not a.star for a in value.args)
    return False


def _number_param(ctx: FileContext, param: cst.Param) -> bool:
    if param.star:
        return False
    ann = code(param.annotation.annotation) if param.annotation is not None else None
    if ann is not None:
        return ann in {"float", "int"}
    return param.default is not None and is_number(param.default)
