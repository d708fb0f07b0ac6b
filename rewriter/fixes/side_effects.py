"""MND1xx: side effects (print, logger methods, warnings.warn, time.*, the debugger, random, deepcopy).

Policies (``[tool.mend] side-effects``, ``mend fix --side-effects``):

* ``keep`` (default): ``if not torch.compiler.is_compiling(): <statement> else: _mend_emit(__name__,
  "logger.info", *args)``. Eager runs exactly as before; under torch.compile ``_mend_emit`` (a helper
  added to the file) makes the same call through ``torch.ops.mend.emit``, an operator registered as an
  ordered effect: the compiled graph makes the call where it stood, on every call, in order with the
  graph's other effects, also from an inlined submodule or helper (Dynamo's own reordering of logging
  calls drops calls made in inlined frames). Where the call cannot travel through the operator (the
  callee is not a module global or builtin, a container or non-literal keyword argument,
  ``logger.exception`` or a call in an ``except``), the finding is declined: guarding would skip the
  message under compile, which ``keep`` does not do.
* ``guard``: ``if not torch.compiler.is_compiling(): <statement>``. Eager runs exactly as
  before; under torch.compile the statement is skipped (no output from inside the graph).
* ``drop``: the statement is removed (eager output is lost too), so this policy is an unsafe fix.
* ``defer``: the call becomes ``mend.rewriter.runtime.defer(fn, *args)``: eager calls it at once;
  under compile the call and a snapshot of its tensor arguments are buffered and replayed after the
  graph by the compile boundary (``mend.rewriter.runtime.boundary``). Needs mend at run time; unsafe
  because output moves in time.

A time call whose value is assigned (``t0 = time.perf_counter()``) is guarded as an expression,
``time.perf_counter() if not torch.compiler.is_compiling() else 0.0``; this is safe only when every
use of the name is itself inside an output call (print/log) and the policy is ``guard``, which skips
those calls under compile too (under ``keep`` they would report 0.0).

``random.random()`` (MND105) becomes ``torch.rand(())`` only on request (``--torch-rng``, unsafe);
``copy.deepcopy(t)`` (MND108) becomes ``t.clone()`` when ``t`` is provably a tensor (declined otherwise:
``.clone()`` on a config or a dict would crash).
"""

from __future__ import annotations

import builtins

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.torch_facts import LOGGER_METHODS
from mend.rewriter.analysis import code, dotted, eager_else, parse_expr, parse_stmt, walk
from mend.rewriter.engine import Decline, FileContext, Plan
from mend.rewriter.fixes.base import fixer
from mend.rewriter.fixes.control_flow import _compile_boundaries, reporting_if_for


def _is_reporting_call(ctx: FileContext, call: cst.Call) -> bool:
    qual = ctx.imports.qualify(call.func) or ""
    if qual == "print" or qual.startswith(("logging.", "warnings.warn")):
        return True
    if isinstance(call.func, cst.Attribute) and call.func.attr.value in LOGGER_METHODS:
        recv = call.func.value
        name = recv.attr.value if isinstance(recv, cst.Attribute) else getattr(recv, "value", "")
        return isinstance(name, str) and ("log" in name.lower())
    return False


def _guard_test(ctx: FileContext) -> tuple[str, list]:
    torch, imports = ctx.torch_name()
    return f"not {torch}.compiler.is_compiling()", imports


def _statement_for(ctx: FileContext, diag: Diagnostic) -> tuple[cst.SimpleStatementLine | None, cst.Call | None]:
    call = ctx.find(cst.Call, diag)
    if call is None:
        return None, None
    # Climb to the outermost call expression statement (e.g. time.perf_counter() inside print(...)).
    stmt = ctx.statement_line(call)
    return stmt, call


@fixer("MND101", "MND102", "MND103", "MND104", "MND106")
def fix_side_effect(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    stmt, call = _statement_for(ctx, diag)
    if call is None or stmt is None:
        return Decline(diag, "could not find the call statement at this position")
    if ctx.in_compile_guard(stmt):
        return Decline(diag, "already guarded by torch.compiler.is_compiling()")
    if len(stmt.body) != 1:
        return Decline(diag, "several statements share this line; split them first")
    small = stmt.body[0]
    policy = ctx.options.side_effects
    if diag.code == "MND106":
        policy = "guard"  # a debugger stop has no deferred meaning
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        if policy in {"guard", "keep"} and diag.code in {"MND101", "MND102", "MND103"}:
            shared = reporting_if_for(ctx, diag, stmt)  # `if <tensor cond>: log(...)`: guard the whole if
            if shared is not None:
                return shared
        return _fix_statement(ctx, diag, stmt, small.value, policy)
    if isinstance(small, (cst.Assign, cst.AnnAssign)) and diag.code == "MND104":
        return _fix_assigned_time(ctx, diag, stmt, small, call)
    return Decline(diag, "the call's value is used; only statements and assigned time calls are repaired")


def _fix_statement(ctx: FileContext, diag: Diagnostic, stmt: cst.SimpleStatementLine, call: cst.Call,
                   policy: str) -> Plan | Decline:
    if policy == "drop":
        parent = ctx.parent(stmt)
        siblings = getattr(parent, "body", ())
        repl = (cst.SimpleStatementLine(body=[cst.Pass()], leading_lines=stmt.leading_lines)
                if isinstance(siblings, (list, tuple)) and len(siblings) == 1 else cst.RemovalSentinel.REMOVE)
        return Plan(diag, "remove the call (side-effects = drop)", "unsafe", [(stmt, repl)])
    if policy == "defer" and diag.code in {"MND101", "MND102", "MND103"}:
        if any(a.star for a in call.args):
            return Decline(diag, "cannot defer a call with *args/**kwargs unpacking")
        new_call = cst.Call(
            func=cst.Name("_mend_defer"),
            args=[cst.Arg(value=call.func, comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))]
            + list(call.args),
        )
        new_stmt = stmt.with_changes(body=[cst.Expr(value=new_call)])
        edits: list = [(stmt, new_stmt)]
        imports = [("mend.rewriter.runtime", "defer", "_mend_defer")]
        boundaries = _compile_boundaries(ctx, "_mend_boundary")
        if boundaries:  # flush deferred output after every call of this file's compiled objects
            edits += boundaries
            imports.append(("mend.rewriter.runtime", "boundary", "_mend_boundary"))
        return Plan(diag, "defer the call until after the graph (side-effects = defer)", "unsafe",
                    edits, imports=imports)
    if policy == "keep" and diag.code in {"MND101", "MND102", "MND103"}:
        emit = _emit_call(ctx, stmt, call)
        if isinstance(emit, str):  # guarding would lose the message under compile: not the policy's promise
            return Decline(diag, f"the message cannot be kept under compile: {emit} (`--side-effects guard` "
                                 "skips it under compile)")
        return _keep_plan(ctx, diag, stmt, emit)
    test, imports = _guard_test(ctx)
    guarded = cst.If(
        test=parse_expr(test),
        body=cst.IndentedBlock(body=[stmt.with_changes(leading_lines=[])]),
        leading_lines=stmt.leading_lines,
    )
    what = {"MND106": "debugger stop"}.get(diag.code, "call")
    why = " (side-effects = guard)" if diag.code in {"MND101", "MND102", "MND103"} else ""
    return Plan(diag, f"guard the {what} with `if {test}:` (eager unchanged, skipped under compile){why}",
                "safe", [(stmt, guarded)], imports=imports)


def _keep_plan(ctx: FileContext, diag: Diagnostic, stmt: cst.SimpleStatementLine, emit: list[str]) -> Plan:
    """Eager keeps the call; compiled code calls ``_mend_emit(__name__, spec, *args)``, an ordered effect of
    the graph."""
    torch, imports = ctx.torch_name()
    split = eager_else(torch, [stmt], [parse_stmt(f"_mend_emit({', '.join(emit)})\n")])
    return Plan(diag, "keep the message: eager unchanged, under compile the graph makes the call where it stood "
                      "(`_mend_emit`)", "safe", [(stmt, split)], imports=imports, helpers=["_mend_emit"])


SHAPE_VIEWS = {"tuple": "tuple", "list": "list"}  # tuple(t.shape) / list(t.shape); bare t.shape is "shape"


def _emit_call(ctx: FileContext, stmt: cst.SimpleStatementLine, call: cst.Call, when: str | None = None
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
                    _literal(arg.value) or _named_object(ctx, facts, arg.value, any_case=True)):
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


def _old_emit(ctx: FileContext) -> bool:
    """The file already has a ``_mend_emit`` from before the graph operator (helpers are added once)."""
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


def _module_globals(ctx: FileContext) -> set[str]:
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


def _fix_assigned_time(ctx: FileContext, diag: Diagnostic, stmt: cst.SimpleStatementLine,
                       small: cst.Assign | cst.AnnAssign, call: cst.Call) -> Plan | Decline:
    value = small.value
    if value is None or not (value is call or isinstance(value, cst.Call)):
        return Decline(diag, "the time call is part of a larger expression")
    targets = small.targets if isinstance(small, cst.Assign) else [cst.AssignTarget(small.target)]
    if len(targets) != 1 or not isinstance(targets[0].target, cst.Name):
        return Decline(diag, "the time value is assigned to something other than one name")
    name = targets[0].target.value
    func = ctx.enclosing_function(stmt)
    facts = ctx.facts(func)
    only_reported = True
    for use in facts.loads.get(name, []):
        inside = False
        for anc in ctx.ancestors(use):
            if isinstance(anc, cst.Call) and _is_reporting_call(ctx, anc):
                inside = True
                break
            if isinstance(anc, (cst.BaseCompoundStatement, cst.SimpleStatementLine)):
                break
        only_reported &= inside
    torch, imports = ctx.torch_name()
    new_value = parse_expr(f"({code(value)} if not {torch}.compiler.is_compiling() else 0.0)").with_changes(
        lpar=(), rpar=())
    new_small = small.with_changes(value=new_value)
    # only reported, and the reports are skipped under compile (guard): nothing can see the placeholder 0.0;
    # under keep the reports are made under compile too, and would show it
    guarded_reports = only_reported and ctx.options.side_effects == "guard"
    applic = "safe" if guarded_reports else "unsafe"
    msg = f"read the clock only in eager: `{name} = ... if not {torch}.compiler.is_compiling() else 0.0`"
    if not only_reported:
        msg += f" (`{name}` feeds more than output calls, so compiled results may change)"
    elif not guarded_reports:
        msg += f" (the messages that report `{name}` show 0.0 under compile)"
    return Plan(diag, msg, applic, [(small, new_small)], imports=imports)


@fixer("MND105")
def fix_random(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    call = ctx.find(cst.Call, diag)
    if call is None:
        return Decline(diag, "could not find the call at this position")
    qual = ctx.imports.qualify(call.func) or ""
    reason = ("Python's random stream cannot be traced; replacing it with torch's RNG changes the "
              "numbers drawn. Pass the value in as an argument, or opt in with --torch-rng --unsafe-fixes")
    if not ctx.options.torch_rng:
        return Decline(diag, reason)
    if qual not in {"random.random"} or call.args:
        return Decline(diag, f"only random.random() has a torch replacement (got {qual or code(call.func)})")
    torch, imports = ctx.torch_name()
    return Plan(diag, f"draw from torch's RNG: `{torch}.rand(())` (a 0-d tensor, different stream)",
                "unsafe", [(call, parse_expr(f"{torch}.rand(())"))], imports=imports)


def _contains(node: cst.CSTNode, target: cst.CSTNode) -> bool:
    return any(n is target for n in walk(node))


@fixer("MND108")
def fix_deepcopy(ctx: FileContext, diag: Diagnostic) -> Plan | Decline:
    call = ctx.find(cst.Call, diag, pred=lambda n: (ctx.imports.qualify(n.func) or "") == "copy.deepcopy")
    if call is None:
        return Decline(diag, "could not find `copy.deepcopy(...)` at this position")
    if len(call.args) != 1 or call.args[0].keyword is not None or call.args[0].star:
        return Decline(diag, "deepcopy with a memo argument is not rewritten")
    arg = call.args[0].value
    facts = ctx.facts(ctx.enclosing_function(call))
    text = code(arg)
    if not isinstance(arg, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        text = f"({text})"
    new = parse_expr(f"{text}.clone()")
    if facts.is_tensor(arg):
        return Plan(diag, "`copy.deepcopy(t)` -> `t.clone()`", "safe", [(call, new)], drop_imports=["copy"])
    # `.clone()` exists only on tensors: on anything else (a config, a dict, a module) the rewrite would
    # crash (measured: transformers' Whisper deep-copies `self.config` in forward).
    return Decline(diag, f"mend cannot prove `{text}` is a tensor, and `.clone()` exists only on tensors "
                         "(annotate it `torch.Tensor` if it is one)")
