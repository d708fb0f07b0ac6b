"""Family 1 (print, logger methods, warnings.warn, time.*) and family 6's debugger guard.

Policies (``[tool.mend] side-effects``, ``mend fix --side-effects``):

* ``guard`` (default): ``if not torch.compiler.is_compiling(): <statement>``. Eager runs exactly as
  before; under torch.compile the statement is skipped (no output from inside the graph).
* ``drop``: the statement is removed (eager output is lost too), so this policy is an unsafe fix.
* ``defer``: the call becomes ``mend.rewriter.runtime.defer(fn, *args)``: eager calls it at once;
  under compile the call and a snapshot of its tensor arguments are buffered and replayed after the
  graph by the compile boundary (``mend.rewriter.runtime.boundary``). Needs mend at run time; unsafe
  because output moves in time.

A time call whose value is assigned (``t0 = time.perf_counter()``) is guarded as an expression,
``time.perf_counter() if not torch.compiler.is_compiling() else 0.0``; this is safe only when every
use of the name is itself inside an output call (print/log), which is then guarded too.
"""

from __future__ import annotations

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.analysis import code, parse_expr, walk
from mend.rewriter.engine import Decline, FileContext, Plan

REPORTING = ("print", "logging.", "warnings.warn")
LOGGER_METHODS = {"debug", "info", "warning", "warning_once", "info_once", "error", "exception",
                  "critical", "fatal", "log", "warn"}


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
        if policy == "guard" and diag.code in {"MND101", "MND102", "MND103"}:
            from mend.rewriter.fixes.branches import reporting_if_for

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
        from mend.rewriter.fixes.branches import _compile_boundaries

        edits: list = [(stmt, new_stmt)]
        imports = [("mend.rewriter.runtime", "defer", "_mend_defer")]
        boundaries = _compile_boundaries(ctx, "_mend_boundary")
        if boundaries:  # flush deferred output after every call of this file's compiled objects
            edits += boundaries
            imports.append(("mend.rewriter.runtime", "boundary", "_mend_boundary"))
        return Plan(diag, "defer the call until after the graph (side-effects = defer)", "unsafe",
                    edits, imports=imports)
    test, imports = _guard_test(ctx)
    guarded = cst.If(
        test=parse_expr(test),
        body=cst.IndentedBlock(body=[stmt.with_changes(leading_lines=[])]),
        leading_lines=stmt.leading_lines,
    )
    what = {"MND106": "debugger stop"}.get(diag.code, "call")
    return Plan(diag, f"guard the {what} with `if {test}:` (eager unchanged, skipped under compile)",
                "safe", [(stmt, guarded)], imports=imports)


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
    applic = "safe" if only_reported else "unsafe"
    msg = f"read the clock only in eager: `{name} = ... if not {torch}.compiler.is_compiling() else 0.0`"
    if not only_reported:
        msg += f" (`{name}` feeds more than output calls, so compiled results may change)"
    return Plan(diag, msg, applic, [(small, new_small)], imports=imports)


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
