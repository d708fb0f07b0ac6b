"""Reporting calls (print, logging, ``warnings.warn``) in traced code: what the side-effect repairs share.

:func:`is_reporting_call` recognises one; :func:`guard_test` is the eager-only test a guard puts around it
(``not torch.compiler.is_compiling()``); :func:`emit_arguments` writes the arguments of ``_mend_emit``, which
makes the call from the compiled graph through the ordered-effect operator ``torch.ops.mend.emit`` (the ``keep``
policy), or says why the call cannot travel.
"""

from __future__ import annotations

import builtins

import libcst as cst

from mend.analyzers.static.torch_facts import LOGGER_METHODS
from mend.rewriter.analysis import code, dotted, walk
from mend.rewriter.context import FileContext


def is_reporting_call(ctx: FileContext, call: cst.Call) -> bool:
    qual = ctx.imports.qualify(call.func) or ""
    if qual == "print" or qual.startswith(("logging.", "warnings.warn")):
        return True
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in LOGGER_METHODS:
        recv = call.func.value
        name = recv.attr.value if isinstance(recv, cst.Attribute) else getattr(recv, "value", "")
        return isinstance(name, str) and ("log" in name.lower())
    return False


def guard_test(ctx: FileContext) -> tuple[str, list]:
    torch, imports = ctx.torch_name()
    return f"not {torch}.compiler.is_compiling()", imports


SHAPE_VIEWS = {"tuple": "tuple", "list": "list"}  # tuple(t.shape) / list(t.shape); bare t.shape is "shape"


def emit_arguments(ctx: FileContext, stmt: cst.SimpleStatementLine, call: cst.Call, when: str | None = None
               ) -> list[str] | str:
    """The arguments of ``_mend_emit`` for ``call`` (source texts: ``__name__``, the spec, then the
    values), or the reason the message cannot be kept under compile. ``when``: the source of a condition
    (a tensor or bool) the call is made under.

    The spec names the callee (``logger.info``, ``print``), then ``:kw`` for each keyword argument (their
    values travel last among the positional ones), then `` i.view`` for each argument that is a tensor's
    shape (``tuple(x.shape)``: the tensor's dims travel), names an object (``i.global``: a warning
    category, ``sys.stderr``), is a format template (``i.format.N``: an f-string or ``"...".format(...)``
    whose ``N`` values follow it, so that a size that is symbolic under compile is formatted at run
    time), or is the condition (``i.when``)."""
    name = dotted(call.func)
    if name is None:
        return "the callee is not a plain name or attribute chain"
    head = name.split(".")[0]
    facts = ctx.facts(ctx.enclosing_function(stmt))
    if head in facts.stores or head in facts.params or head not in _module_globals(ctx) | {"print"}:
        return f"`{head}` is not a module global, by which the helper finds the callee"
    if name.endswith(".exception") or any(isinstance(a, (cst.ExceptHandler, cst.ExceptStarHandler))
                                          for a in ctx.ancestors(stmt)):
        return "a report of the exception being handled needs that exception, which the graph does not carry"
    if _old_emit(ctx):
        return "the file's `_mend_emit` predates the graph operator (`torch.ops.mend.emit`); remove it to refresh it"
    values: list[str] = []
    keywords: list[str] = []
    views: list[str] = []
    if when is not None:
        views.append(f"{len(values)}.when")
        values.append(when)
    for arg in sorted(call.args, key=lambda a: a.keyword is not None):  # positional first, as in the call
        if arg.star:
            return "`*args`/`**kwargs` unpacking"
        if arg.keyword is not None:
            kw = arg.keyword.value
            if kw in {"exc_info", "stack_info", "extra", "stacklevel"} or not (
                    _literal(arg.value) or _named_object(ctx, facts, arg.value, any_case=True)
                    or _literal_global(ctx, facts, arg.value)):
                return f"keyword `{kw}` needs a value the graph cannot carry"
            keywords.append(kw)
        why = _emit_value(ctx, facts, arg.value, values, views, top=arg.keyword is None)
        if why is not None:
            return why
    if (ctx.imports.qualify(call.func) or "") == "warnings.warn":  # attributed to this line under compile too
        name += f"@{ctx.line_of(call)}"
    spec = " ".join([":".join([name, *keywords]), *views])
    return ["__name__", f'"{spec}"', *values]  # names, colons, digits, dots and spaces: no quoting needed


def _emit_value(ctx: FileContext, facts, expr: cst.BaseExpression, values: list[str], views: list[str],
                top: bool = True) -> str | None:
    """Append ``expr`` (one argument of the reporting call) to ``values``, with its view; or the reason it
    cannot travel."""
    view = _shape_view(expr)
    if view is not None:
        views.append(f"{len(values)}.{view[1]}")
        values.append(code(view[0]))
        return None
    if _named_object(ctx, facts, expr, any_case=not top):
        views.append(f"{len(values)}.global")
        values.append(f'"{code(expr)}"')
        return None
    template = _format_template(expr) if top else None
    if isinstance(template, str):
        return template
    if template is not None:
        text, parts = template
        at = len(values)
        values.append(text)
        for part in parts:
            why = _emit_value(ctx, facts, part, values, views, top=False)
            if why is not None:
                return why
        views.append(f"{at}.format.{len(values) - at - 1}")
        return None
    if _container(expr):
        return f"`{code(expr)}` is a container, which the graph does not carry"
    if not facts.is_pure(expr):
        return f"`{code(expr)}` calls what Dynamo cannot trace (a clock, a Python function)"
    values.append(code(expr))
    return None


def _format_template(expr: cst.BaseExpression) -> tuple[str, list[cst.BaseExpression]] | str | None:
    """An f-string or ``"...".format(*values)`` as (a ``str.format`` template literal, its values); a reason
    for a form it cannot take apart; None for anything else."""
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Attribute) and expr.func.attr.value == "format" \
            and isinstance(expr.func.value, cst.SimpleString):
        if any(a.keyword is not None or a.star for a in expr.args):
            return "a `str.format` call with keyword or unpacked arguments"
        return code(expr.func.value), [a.value for a in expr.args]
    if not isinstance(expr, cst.FormattedString):
        return None
    text: list[str] = []
    parts: list[cst.BaseExpression] = []

    def field(part: cst.FormattedStringExpression) -> str | None:
        if part.equal is not None:
            return "an f-string `=` field"
        parts.append(part.expression)
        out = "{" + (f"!{part.conversion}" if part.conversion else "")
        if part.format_spec:
            out += ":"
            for spec in part.format_spec:
                if isinstance(spec, cst.FormattedStringText):
                    out += spec.value
                else:
                    if spec.format_spec or spec.conversion or spec.equal is not None:
                        return "a nested f-string field with its own format"
                    parts.append(spec.expression)
                    out += "{}"
        text.append(out + "}")
        return None

    for part in expr.parts:
        if isinstance(part, cst.FormattedStringText):
            text.append(part.value)
        else:
            why = field(part)
            if why is not None:
                return why
    prefix = expr.prefix.replace("f", "").replace("F", "")
    return f"{prefix}{expr.start[len(expr.prefix):]}{''.join(text)}{expr.end}", parts


def _named_object(ctx: FileContext, facts, expr: cst.BaseExpression, any_case: bool = False) -> bool:
    """``FutureWarning``, ``warnings.DeprecationWarning``: a class (or other object the graph cannot carry)
    named by a builtin or an import, which the call finds again by name at run time. ``any_case``: any
    attribute of an import (a keyword value: ``file=sys.stderr``)."""
    name = dotted(expr)
    if name is None:
        return False
    head = name.split(".")[0]
    if head in facts.stores or head in facts.params:
        return False
    last = name.split(".")[-1]
    if head in ctx.imports.names:  # `warnings.DeprecationWarning`, an imported class: CamelCase by convention
        return (any_case and "." in name) or (last[:1].isupper() and not last.isupper())
    return head not in _module_globals(ctx) and isinstance(getattr(builtins, head, None), type) and "." not in name


def _literal_global(ctx: FileContext, facts, expr: cst.BaseExpression) -> bool:
    """``SEPARATOR`` in ``sep=SEPARATOR``: a module global bound once, at module level, to a literal, and
    never declared ``global`` (rebound) in a function: its value travels as the literal would."""
    if not isinstance(expr, cst.Name) or expr.value in facts.stores or expr.value in facts.params:
        return False
    values = ctx.memo("reporting.module_bindings", lambda: _module_bindings(ctx)).get(expr.value, [])
    rebound = expr.value in ctx.memo("reporting.declared_global", lambda: _declared_global(ctx))
    return len(values) == 1 and values[0] is not None and _literal(values[0]) and not rebound


def _module_bindings(ctx: FileContext) -> dict[str, list[cst.BaseExpression | None]]:
    """Each name a module-level simple statement binds -> the values it is bound to there, in order (computed
    once per parsed file: every message repair asks)."""
    out: dict[str, list[cst.BaseExpression | None]] = {}
    for stmt in ctx.module.body:
        for node in stmt.body if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(node, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
                for name in _bound_names(node):
                    out.setdefault(name, []).append(node.value)
    return out


def _declared_global(ctx: FileContext) -> frozenset[str]:
    """The names a ``global`` statement anywhere in the file declares."""
    return frozenset(n.name.value for node in walk(ctx.module) if isinstance(node, cst.Global) for n in node.names)


def _bound_names(node: cst.Assign | cst.AnnAssign | cst.AugAssign) -> set[str]:
    targets = [t.target for t in node.targets] if isinstance(node, cst.Assign) else [node.target]
    return {n.value for t in targets for n in walk(t) if isinstance(n, cst.Name)}


def _old_emit(ctx: FileContext) -> bool:
    """The file already has a ``_mend_emit`` from before the graph operator (helpers are added once)."""
    return ctx.memo("reporting.old_emit", lambda: _finds_old_emit(ctx))


def _finds_old_emit(ctx: FileContext) -> bool:
    for stmt in ctx.module.body:
        if isinstance(stmt, cst.FunctionDef) and stmt.name.value == "_mend_emit":
            return "_mend_emit_pack" not in code(stmt)
    return False


def _shape_view(expr: cst.BaseExpression) -> tuple[cst.BaseExpression, str] | None:
    """``t.shape``, ``t.size()``, ``tuple(t.shape)``, ``list(t.shape)`` -> (``t``, view)."""
    def shape_of(e: cst.BaseExpression) -> cst.BaseExpression | None:
        if isinstance(e, cst.Attribute) and e.attr.value == "shape":
            return e.value
        if isinstance(e, cst.Call) and isinstance(e.func, cst.Attribute) and e.func.attr.value == "size" \
                and not e.args:
            return e.func.value
        return None

    inner = shape_of(expr)
    if inner is not None:
        return inner, "shape"
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in SHAPE_VIEWS \
            and len(expr.args) == 1 and not expr.args[0].keyword:
        inner = shape_of(expr.args[0].value)
        if inner is not None:
            return inner, SHAPE_VIEWS[expr.func.value]
    return None


def _module_globals(ctx: FileContext) -> frozenset[str]:
    """The names the file imports or binds at module level (once per parsed file: every message repair asks)."""
    return ctx.memo("reporting.module_globals", lambda: frozenset(_find_module_globals(ctx)))


def _find_module_globals(ctx: FileContext) -> set[str]:
    out = set(ctx.imports.names)
    for stmt in ctx.module.body:
        for node in walk(stmt) if isinstance(stmt, cst.SimpleStatementLine) else ():
            if isinstance(node, cst.AssignTarget) and isinstance(node.target, cst.Name):
                out.add(node.target.value)
    return out


def _container(expr: cst.BaseExpression) -> bool:
    if isinstance(expr, (cst.Tuple, cst.List, cst.Dict, cst.Set, cst.ListComp, cst.DictComp, cst.SetComp)):
        return True
    if isinstance(expr, cst.Call) and isinstance(expr.func, cst.Name) and expr.func.value in {
            "tuple", "list", "dict", "set"}:
        return True
    return isinstance(expr, cst.Attribute) and expr.attr.value == "shape"


def _literal(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, (cst.SimpleString, cst.Integer, cst.Float, cst.ConcatenatedString)) or (
        isinstance(expr, cst.Name) and expr.value in {"True", "False", "None"})


__all__ = ["SHAPE_VIEWS", "emit_arguments", "guard_test", "is_reporting_call"]
