"""A validation guard on a tensor condition as an in-graph check (MND203, and MND301's counted checks).

``if <tensor cond>: raise E("literal")`` with a builtin exception becomes::

    if not torch.compiler.is_compiling():
        <the original if/raise>            # eager: unchanged
    else:
        torch._assert_async(torch.logical_not(cond), "[mend:E] literal")

and every ``torch.compile`` boundary in the same file is wrapped with ``_mend_restore_exceptions``,
which re-raises ``E("literal")``. Unsafe: under compile the check runs inside the graph (on CUDA it
is asynchronous) and, where no boundary is wrapped, surfaces as ``RuntimeError("[mend:E] literal")``.
"""

from __future__ import annotations

import ast
import builtins

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import FunctionFacts, body_statements, code, eager_else, parse_stmt, strip_parens, walk
from mend.rewriter.context import FileContext
from mend.rewriter.parts.boundaries import compile_boundaries
from mend.rewriter.parts.lower import Declined, Lower, drop_item
from mend.rewriter.plan import Decline, Plan


def validation_plan(ctx: FileContext, diag: Diagnostic, node: cst.If,
                    compiled_test: cst.BaseExpression | None = None) -> Plan | Decline:
    """The MND203 repair of ``node`` (``if <cond>: raise E(msg)``); ``compiled_test``: the condition as
    compiled code computes it, when it differs from the written one (a count read as a tensor)."""
    if node.orelse is not None or (isinstance(ctx.parent(node), cst.If) and ctx.parent(node).orelse is node):
        return Decline(diag, "the guard has elif/else branches")
    if ctx.in_compile_guard(node):
        return Decline(diag, "already split by torch.compiler.is_compiling()")
    stmts = body_statements(node.body)
    if not stmts or len(stmts) != 1 or not isinstance(stmts[0], cst.Raise):
        return Decline(diag, "the guard body is not exactly one `raise`")
    raise_stmt = stmts[0]
    if raise_stmt.cause is not None:
        return Decline(diag, "`raise ... from ...` is not rewritten")
    exc = raise_stmt.exc
    if not (isinstance(exc, cst.Call) and isinstance(exc.func, cst.Name) and len(exc.args) == 1
            and exc.args[0].keyword is None and not exc.args[0].star):
        return Decline(diag, "the raise is not `E(\"message\")` with one positional argument")
    exc_name = exc.func.value
    builtin_exc = getattr(builtins, exc_name, None)
    func = ctx.enclosing_function(node)
    facts = ctx.facts(func)
    if not (isinstance(builtin_exc, type) and issubclass(builtin_exc, Exception)) or exc_name in facts.stores \
            or exc_name in ctx.imports.names:
        return Decline(diag, f"`{exc_name}` is not a builtin exception, so it cannot be re-raised by name")
    message = _message_template(exc.args[0].value)
    if message is None:
        return Decline(diag, "the message is not a string literal or an f-string (formatting with `%` or "
                             "`.format()` is not rewritten)")
    if ctx.in_try(node):
        return Decline(diag, "the guard is inside a `try` in the same function; the moved check could "
                             "not be caught there")
    test = strip_parens(compiled_test if compiled_test is not None else node.test)
    if not facts.is_pure(drop_item(test)):
        return Decline(diag, "the condition has calls mend cannot prove side-effect free")
    skipped = next((op for op in _skipped_when_quiet(test) if not facts.is_total(drop_item(op))), None)
    if skipped is not None:
        return Decline(diag, f"`{code(skipped)}`: an `and`/`or` operand Python skips when the check passes, "
                             "which the check in the graph computes always, can raise")
    torch, imports = ctx.torch_name()
    helpers = []
    try:
        cond = _validation_cond(test, facts, torch, helpers)
    except Declined as exc_:
        return Decline(diag, str(exc_))
    marker = f"[mend:{exc_name}] {message}"
    assert_text = f"{torch}._assert_async({torch}.logical_not({cond}), {marker!r})"
    split = eager_else(torch, [node], [parse_stmt(assert_text + "\n")])
    edits: list = [(node, split)]
    boundaries = compile_boundaries(ctx)
    for target, repl in boundaries:
        edits.append((target, repl))
    if boundaries:
        helpers.append("_mend_restore_exceptions")
    where = "restored at this file's compile boundary" if boundaries else (
        "raised as RuntimeError('[mend:...]') unless the caller wraps its compiled object with "
        "mend.rewriter.runtime.restore_exceptions")
    if any(isinstance(n, cst.FormattedString) for n in walk(exc.args[0].value)):
        where += "; the f-string's values are written as their source, `{name}`"
    return Plan(diag, f"validation guard -> {torch}._assert_async under compile ({exc_name} {where})",
                "unsafe", edits, imports=imports, helpers=helpers)


def _skipped_when_quiet(test: cst.BaseExpression, quiet: bool = False) -> list[cst.BaseExpression]:
    """The ``and``/``or`` operands of ``test`` that Python skips on a run where ``test`` is ``quiet`` (the
    check passes): ``b`` of ``a and b`` when ``a`` is false, of ``a or b`` under ``not`` when ``a`` is true.
    Where the check fires anyway (``b`` of ``a or b``), an error computing ``b`` only replaces its error."""
    test = strip_parens(test)
    if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
        return _skipped_when_quiet(test.expression, not quiet)
    if not isinstance(test, cst.BooleanOperation):
        return []
    inner = [*_skipped_when_quiet(test.left, quiet), *_skipped_when_quiet(test.right, quiet)]
    skips_quietly = isinstance(test.operator, cst.And) != quiet  # `and` skips on false, `or` on true
    return [test.right, *inner] if skips_quietly else inner


def _message_template(node: cst.BaseExpression) -> str | None:
    """The text of a literal message; for an f-string, its literal parts with each replacement field
    written as its source (``f"tokens: {n}"`` -> ``"tokens: {n}"``): the values are not known inside
    the graph. None for anything else."""
    if isinstance(node, cst.SimpleString):
        value = node.evaluated_value
        return value if isinstance(value, str) else None
    if isinstance(node, cst.ConcatenatedString):
        left, right = _message_template(node.left), _message_template(node.right)
        return None if left is None or right is None else left + right
    if isinstance(node, cst.FormattedString):
        prefix = node.prefix.lower().replace("f", "")
        if "b" in prefix:
            return None
        parts = []
        for part in node.parts:
            if isinstance(part, cst.FormattedStringText):
                text = part.value.replace("{{", "{").replace("}}", "}")
                parts.append(ast.literal_eval(f"{prefix}{node.start[len(node.prefix):]}{text}{node.end}"))
            else:
                parts.append("{" + code(part.expression) + "}")
        return "".join(parts)
    return None


def _validation_cond(test: cst.BaseExpression, facts: FunctionFacts, torch: str, helpers: list) -> str:
    """Bool tensor that is True when the guard fires."""
    neg = False
    inner = test
    if isinstance(inner, cst.UnaryOperation) and isinstance(inner.operator, cst.Not):
        neg, inner = True, strip_parens(inner.expression)
    if isinstance(inner, cst.Call):
        qual = facts.imports.qualify(inner.func) or ""
        if qual == "torch.equal" and len(inner.args) == 2:
            helpers.append("_mend_tensor_equal")
            body = f"_mend_tensor_equal({code(inner.args[0].value)}, {code(inner.args[1].value)})"
            return f"{torch}.logical_not({body})" if neg else body
    try:
        lower = Lower(facts, torch)
        cond = lower(test)
        helpers.extend(lower.helpers)
        return cond
    except Declined:
        if not _plain_comparison(test):
            raise
    # The analyzer found a tensor here that this function's facts cannot show (a count from an
    # unannotated argument, `(input_ids == k).sum()`): ``torch.as_tensor`` returns a tensor as it is and
    # makes a Python bool a 0-d tensor, so the check holds exactly when the original condition does.
    return f"{torch}.as_tensor({code(test)})"


def _plain_comparison(test: cst.BaseExpression) -> bool:
    """``a <op> b`` with one order or equality operator (not ``is``/``in``)."""
    return isinstance(test, cst.Comparison) and len(test.comparisons) == 1 and not isinstance(
        test.comparisons[0].operator, (cst.Is, cst.IsNot, cst.In, cst.NotIn))


__all__ = ["validation_plan"]
