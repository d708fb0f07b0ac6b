"""MND1xx: side effects Dynamo cannot put in a graph (print, logging, warnings, time, random, ...)."""

from __future__ import annotations

import ast

from mend.analyzers.static import tensors as tk
from mend.analyzers.static import torch_facts
from mend.analyzers.static.rules.base import FixInfo, Rule, checker, register
from mend.analyzers.static.rules.context import Context

_HDR = "import torch\nfrom torch import nn\n"

SIDE_EFFECT_FIX_DOC = """\
Policy `[tool.mend] side-effects` (or `mend fix --side-effects`):

- `keep` (default, **safe**): `if not torch.compiler.is_compiling(): <the call> else:
  _mend_emit(__name__, "logger.info", *args)`. Eager runs exactly as before; under `torch.compile`
  `_mend_emit` (a helper function) makes the same call through `torch.ops.mend.emit`, an
  operator registered as an ordered effect: the compiled graph makes the call where it stood, on
  every call, in order with the graph's other effects, also from an inlined submodule or helper
  (Dynamo's `reorderable_logging_functions` drops calls made in inlined frames). Sizes that are
  symbolic under compile are passed as numbers and formatted when the graph runs (f-strings and
  `"...".format(...)` travel as a template and its values). No graph break; the repaired file needs
  only torch. One-shot reports (`logger.warning_once`) stay one-shot. A tensor argument that requires
  grad would print without its `grad_fn` inside the graph: that call is made as written, at a graph
  break (the text the original compiled program printed). Where the call cannot travel (the callee is
  not a module global or `print`, a container or non-literal keyword argument, `*args`,
  `logger.exception` or any call inside `except`), the finding is declined with the reason: `keep`
  never skips a message. Under compile a warning is attributed to the call's line before the repair
  (its file's warning registry too) and a log record's `funcName`/`lineno` to the helper; a compiled call that fails while Dynamo traces it emits
  none of the messages before the error.
- `guard` (**safe**): wraps the statement in `if not torch.compiler.is_compiling():`.
  Eager runs exactly as before and program results are unchanged; under `torch.compile` the
  statement does not run (no output from inside the graph).
- `defer` (**unsafe**): `fn(args)` becomes `mend.rewriter.runtime.defer(fn, args)`. Eager calls it
  at once; under compile the call is buffered with a snapshot (clone) of its tensor arguments and
  replayed after the graph by `mend.rewriter.runtime.flush()` / a boundary wrapped with
  `mend.rewriter.runtime.boundary(...)`. Output moves in time (a replayed warning is attributed to
  mend's runtime, not the program's line; in eager it keeps the program's line); a compiled call that
  raises loses the calls recorded before the error; the repaired code needs mend.
- `drop` (**unsafe**): removes the statement (its output is lost in eager too).

A time call whose value is assigned (`t0 = time.perf_counter()`) becomes
`time.perf_counter() if not torch.compiler.is_compiling() else 0.0`: safe when the name only feeds
output calls and the policy is `guard` (those calls are skipped under compile too); unsafe otherwise
(under `keep` the messages would report 0.0).
Declines: a call whose value is used elsewhere, several statements on one line, `*args` with defer.
"""

register(
    Rule(
        "MND101", "print-in-compiled-code",
        "`print()` in compiled code: Dynamo cannot trace the builtin `print` and breaks the graph",
        ("GB0059",), "break",
        what="Finds calls to the builtin `print` in code that `torch.compile` traces.",
        why="""
            Dynamo cannot put a `print` into an FX graph. It ends the graph before the call, runs
            the print in Python and starts a new graph after it (GB0059 "Failed to trace builtin
            operator"). Each break costs a graph launch and blocks fusion across it.
        """,
        use_instead="""
            Guard the print so it only runs eagerly, or let Dynamo reorder it after the graph
            (`torch._dynamo.config.reorderable_logging_functions.add(print)`):

            ```python
            if not torch.compiler.is_compiling():
                print("stats", x.shape)
            ```
        """,
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    print("input", x.shape)
                    return x.relu()
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    if not torch.compiler.is_compiling():
                        print("input", x.shape)
                    return x.relu()
        """, """
            def print(*args):
                pass

            import torch

            @torch.compile
            def f(x):
                print(x)
                return x + 1
        """),
        fix=FixInfo(
            "sometimes", "safe", "guard (or defer/drop) the print",
            SIDE_EFFECT_FIX_DOC,
            strategies=("reporting_if", "drop_call", "defer_call", "emit_call", "guard_call"),
        ),
    ),
    Rule(
        "MND102", "logger-call-in-compiled-code",
        "logging.Logger method in compiled code: Dynamo does not trace Logger methods and breaks the graph",
        ("GB0291",), "break",
        what="""
            Finds calls to `logging.Logger` methods (`debug`, `info`, `warning`, `error`, ...,
            and transformers' `warning_once`/`info_once`) on loggers created with
            `logging.getLogger(...)` or a library `get_logger(...)`, and calls to the `logging`
            module functions, in traced code; also the questions about a logger's configuration
            (`isEnabledFor`, `getEffectiveLevel`, `hasHandlers`), which break the same way and are
            not repaired (their answer decides code).
        """,
        why="""
            Logger methods are not supported outside `torch.export`: Dynamo breaks the graph at each
            call (GB0291), even when the log level would drop the message.
        """,
        use_instead="""
            Guard the call with `if not torch.compiler.is_compiling():`, or drop it under compile
            with `torch._dynamo.config.ignore_logging_functions.add(logger.info)`.
            `reorderable_logging_functions` does not work for Logger methods.
        """,
        invalid=("import logging\n" + _HDR + """
            logger = logging.getLogger(__name__)

            class M(nn.Module):
                def forward(self, x):
                    logger.debug("shape %s", x.shape)
                    return x.relu()
        """,),
        valid=("import logging\n" + _HDR + """
            logger = logging.getLogger(__name__)

            class M(nn.Module):
                def forward(self, x):
                    if not torch.compiler.is_compiling():
                        logger.debug("shape %s", x.shape)
                    return x.relu()
        """,),
        fix=FixInfo(
            "sometimes", "safe", "guard (or defer/drop) the logger call",
            SIDE_EFFECT_FIX_DOC,
            strategies=("reporting_if", "drop_call", "defer_call", "emit_call", "guard_call"),
        ),
    ),
    Rule(
        "MND103", "warnings-warn-in-compiled-code",
        "`warnings.warn()` in compiled code: Dynamo cannot trace the C builtin `_warnings.warn` and breaks the graph",
        ("GB0007",), "break",
        what="Finds `warnings.warn(...)` calls in traced code.",
        why="`warnings.warn` is a C builtin Dynamo marks as skipped: the graph breaks at the call (GB0007).",
        use_instead="""
            Warn outside the compiled function, guard with `torch.compiler.is_compiling()`, or add it
            to `torch._dynamo.config.reorderable_logging_functions` so it runs after the graph.
        """,
        invalid=("import warnings\n" + _HDR + """
            class M(nn.Module):
                def forward(self, x):
                    warnings.warn("slow path")
                    return x.relu()
        """,),
        valid=("import warnings\n" + _HDR + """
            class M(nn.Module):
                def forward(self, x):
                    if not torch.compiler.is_compiling():
                        warnings.warn("slow path")
                    return x.relu()
        """,),
        fix=FixInfo(
            "sometimes", "safe", "guard (or defer/drop) warnings.warn",
            SIDE_EFFECT_FIX_DOC,
            strategies=("reporting_if", "drop_call", "defer_call", "emit_call", "guard_call"),
        ),
    ),
    Rule(
        "MND104", "time-call-in-compiled-code",
        "time/datetime call in compiled code: Dynamo cannot trace the clock and breaks the graph",
        ("GB0007", "GB0156"), "break",
        what="Finds calls into the `time` module and `datetime.now()`/`utcnow()`/`today()` in traced code.",
        why="""
            `time.time()`, `time.perf_counter()` and friends are C builtins marked as skipped (GB0007);
            `datetime.datetime.now()` is an unsupported method call (GB0156). Timing inside a
            compiled region also measures nothing useful: the graph runs as one unit.
        """,
        use_instead="Time around the compiled call, not inside it.",
        invalid=("import time\n" + _HDR + """
            @torch.compile
            def step(x):
                t0 = time.perf_counter()
                return x * 2
        """,),
        valid=("import time\n" + _HDR + """
            @torch.compile
            def step(x):
                return x * 2

            t0 = time.perf_counter()
            step(torch.ones(2))
            print(time.perf_counter() - t0)
        """,),
        fix=FixInfo(
            "sometimes", "safe", "read the clock only in eager",
            SIDE_EFFECT_FIX_DOC,
            strategies=("drop_call", "clock_value", "guard_call"),
        ),
    ),
    Rule(
        "MND105", "python-random-in-compiled-code",
        "Python `random` call in compiled code: Dynamo cannot trace the C random generator and breaks the graph",
        ("GB0007",), "break",
        what="""
            Finds calls to Python's `random` module (`random.random`, `gauss`, `choice`, `shuffle`,
            `sample`, `normalvariate`, `getrandbits`, `seed`) in traced code. `random.randint`,
            `randrange` and `uniform` are traced by Dynamo (the number drawn becomes an input of the
            graph) and are not reported; a branch on their draw is (MND201). A call behind
            `self.training and ...` is reported for training ("only when `self.training`").
        """,
        why="The `random.Random` methods are C code Dynamo marks as skipped: the graph breaks (GB0007).",
        use_instead="Draw the number outside and pass it in, or use `torch.rand(())` (a different RNG stream).",
        invalid=("import random\n" + _HDR + """
            class M(nn.Module):
                def forward(self, x):
                    if random.random() < 0.5:
                        x = x.flip(0)
                    return x
        """,),
        valid=("import random\n" + _HDR + """
            class M(nn.Module):
                def forward(self, x):
                    k = random.randint(0, 3)
                    return x.roll(k)
        """,),
        fix=FixInfo(
            "sometimes", "unsafe", "replace random.random() with torch.rand(()) (opt-in: --torch-rng)",
            "Declined by default: Python's random stream cannot be traced and a torch replacement draws "
            "different numbers. With `--torch-rng --unsafe-fixes`, `random.random()` becomes `torch.rand(())`, "
            "a 0-d tensor from torch's generator (**unsafe**). Declined where the number decides a branch (an "
            "`if`, `while` or conditional expression tests it, directly or through the name it is assigned to): "
            "a branch on torch's draw breaks the graph as well, so the repair would remove nothing.",
            strategies=("torch_rng",),
        ),
    ),
    Rule(
        "MND106", "debugger-in-compiled-code",
        "debugger call in compiled code: `pdb.set_trace()`/`breakpoint()` cannot be traced and break the graph",
        ("GB0007", "GB0059"), "break",
        what="Finds `pdb.set_trace()`, `ipdb.set_trace()` and `breakpoint()` in traced code.",
        why="""
            `breakpoint()` is a builtin Dynamo cannot trace (GB0059); `pdb.set_trace()` reaches
            `sys.audit`, a skipped C builtin (GB0007). Either way the graph breaks and the debugger
            stops in Dynamo's resume function, not in your code.
        """,
        use_instead="Remove the debugger call, or debug with `torch.compiler.set_stance('force_eager')`.",
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    breakpoint()
                    return x.relu()
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    return x.relu()
        """,),
        fix=FixInfo(
            "sometimes", "safe", "guard the debugger stop",
            "Wraps `pdb.set_trace()`/`breakpoint()` in `if not torch.compiler.is_compiling():` (**safe**): "
            "eager still stops, compiled code does not.",
            strategies=("guard_call",),
        ),
    ),
    Rule(
        "MND107", "torch-save-in-compiled-code",
        "`torch.save()` in compiled code: serialization is skipped by Dynamo and breaks the graph",
        ("GB0007", "GB0156"), "break",
        what="Finds `torch.save(...)` in traced code.",
        why="""
            `torch.save` is marked as skipped (GB0007) and file-like objects such as `io.BytesIO()`
            cannot be created in a graph (GB0156).
        """,
        use_instead="Save outside the compiled function, or in a `@torch.compiler.disable` helper.",
        invalid=(_HDR + """
            @torch.compile
            def step(x, path):
                y = x * 2
                torch.save(y, path)
                return y
        """,),
        valid=(_HDR + """
            @torch.compile
            def step(x):
                return x * 2

            torch.save(step(torch.ones(2)), "out.pt")
        """,),
    ),
    Rule(
        "MND108", "deepcopy-in-compiled-code",
        "`copy.deepcopy()` in compiled code: Dynamo does not support deepcopy and breaks the graph",
        ("GB4198", "GB0179"), "break",
        what="Finds `copy.deepcopy(...)` and `copy.copy(...)` calls in traced code.",
        why="Dynamo does not trace `copy.deepcopy` of tensors (GB4198) or other objects (GB0179), nor "
            "`copy.copy` of a dict, a list or a tensor (a skipped function; measured on torch 2.13 and 2.14).",
        use_instead="Use `t.clone()` for tensors and `dict(d)` for a dict; copy modules outside the compiled "
                    "region.",
        invalid=("import copy\n" + _HDR + """
            class M(nn.Module):
                def forward(self, x):
                    y = copy.deepcopy(x)
                    return y + x
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    y = x.clone()
                    return y + x
        """,),
        fix=FixInfo(
            "sometimes", "safe", "copy.deepcopy(t) -> t.clone()",
            "**Safe** when the argument is provably a tensor (annotated `torch.Tensor`, or a torch result): "
            "values are identical. The clone stays connected to autograd where deepcopy makes an independent "
            "leaf; deepcopy of a non-leaf tensor raises in eager, so in practice the argument is a leaf or a "
            "no-grad tensor. Declined when the argument is not provably a tensor (`.clone()` on a config or a "
            "dict would crash). `copy.copy(kwargs)` of the function's own `**kwargs` (always a plain dict) "
            "becomes `dict(kwargs)`, the same shallow copy (**safe**); other `copy.copy` calls are declined.",
            strategies=("deepcopy_clone",),
        ),
    ),
    Rule(
        "MND109", "tensor-to-string",
        "tensor formatted as a string in compiled code: Dynamo cannot trace tensor `__str__`/`__format__`",
        ("GB0088", "GB0059"), "break",
        what="""
            Finds `str(t)` and `repr(t)` where `t` is a tensor, and f-strings holding a tensor whose
            text is used (`len(f"{t}")`), in traced code. An f-string that is only built (or only
            printed, see MND101) is formatted lazily by Dynamo and is not reported.
        """,
        why="""
            Formatting a tensor needs its values. `str(t)`/`repr(t)` break the graph (GB0059);
            using the text of `f"{t}"` is worse: Dynamo raises inside the frame and skips the whole
            function (GB0088).
        """,
        use_instead="Format shapes and dtypes (static), or format values outside the compiled region.",
        invalid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    name = str(x)
                    return x.relu()
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def forward(self, x):
                    name = f"{x.shape}"
                    return x.relu()
        """,),
    ),
    Rule(
        "MND110", "file-io-in-compiled-code",
        "`open()` in compiled code: Dynamo cannot trace file I/O and breaks the graph",
        ("GB0059", "GB0142"), "break",
        what="Finds calls to the builtin `open` in traced code (outside a `with` statement; see MND507).",
        why="`open` is a builtin Dynamo cannot trace (GB0059); file objects cannot live in a graph.",
        use_instead="Read files before calling the compiled function and pass the data in.",
        invalid=(_HDR + """
            @torch.compile
            def f(x):
                fh = open("log.txt", "a")
                return x + 1
        """,),
        valid=(_HDR + """
            @torch.compile
            def f(x):
                return x + 1
        """,),
    ),
)

RANDOM_BREAKING = frozenset(
    f"random.{n}" for n in "random gauss choice choices shuffle sample normalvariate getrandbits seed "
    "betavariate expovariate gammavariate lognormvariate paretovariate triangular vonmisesvariate weibullvariate"
    .split()
)
DATETIME_NOW = frozenset(
    f"datetime.{a}{b}" for a in ("datetime.", "date.", "") for b in ("now", "utcnow", "today")
)
DEBUGGERS = frozenset({"pdb.set_trace", "ipdb.set_trace", "builtins.breakpoint", "pdb.Pdb", "pudb.set_trace"})


# Calls reported with the rule's summary as they are.
PLAIN_CALLS = {
    "builtins.print": "MND101", "warnings.warn": "MND103", "torch.save": "MND107", "copy.deepcopy": "MND108",
    **{name: "MND106" for name in DEBUGGERS},
}
CLOCK_MESSAGE = "in compiled code: Dynamo cannot trace the clock and breaks the graph"


@checker("call")
def side_effect_calls(ctx: Context, call: ast.Call) -> None:
    f = call.func
    q = ctx.qualify(f)
    if q is not None:
        _named_call(ctx, call, q)
        return
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        v = ctx.local_values.get(f.value.id)
        if isinstance(v, ast.Call) and ctx.qualify(v.func) == "builtins.open":
            ctx.report("MND110", call, f"`.{f.attr}()` on a file object in compiled code: Dynamo cannot trace file "
                                       "I/O and breaks the graph")
            return
    if isinstance(f, ast.Attribute) and f.attr in torch_facts.LOGGER_METHODS and ctx.is_logger(f.value):
        ctx.report("MND102", call, f"`.{f.attr}()` on a logging.Logger in compiled code: Dynamo does not trace "
                                   "Logger methods and breaks the graph")
    elif isinstance(f, ast.Attribute) and f.attr in torch_facts.LOGGER_QUERIES and ctx.is_logger(f.value):
        ctx.report("MND102", call, f"`.{f.attr}()` on a logging.Logger in compiled code: Dynamo does not trace "
                                   "Logger methods and breaks the graph (a question about the logger's "
                                   "configuration: no message to keep; ask it once outside the compiled code)")


_CONTAINERS = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)


def _mutable_copy(ctx: Context, arg: ast.AST) -> bool:
    """``copy.copy(arg)`` of what Dynamo does not copy: a tensor, a dict, list or set (a literal, a name bound to
    one, or the function's ``**kwargs``). A Python number, string or tuple of them it copies as a constant (no
    break, measured on torch 2.13); anything else is left unreported."""
    if ctx.kind(arg) in (tk.T, tk.M) or isinstance(arg, _CONTAINERS):
        return True
    if not isinstance(arg, ast.Name):
        return False
    if ctx.node.args.kwarg is not None and ctx.node.args.kwarg.arg == arg.id:
        return True
    return isinstance(ctx.local_values.get(arg.id), _CONTAINERS)


def _named_call(ctx: Context, call: ast.Call, q: str) -> None:
    """A call of a function with a dotted name (``print``, ``logging.info``, ``time.time``, ...)."""
    code = PLAIN_CALLS.get(q)
    if code is not None:
        ctx.report(code, call)
    elif q == "copy.copy" and len(call.args) == 1 and _mutable_copy(ctx, call.args[0]):
        ctx.report("MND108", call, "`copy.copy()` in compiled code: Dynamo does not trace `copy.copy` and breaks "
                                   "the graph")
    elif q in torch_facts.LOGGING_FUNCS:
        ctx.report("MND102", call, f"`{q}()` in compiled code: it calls a logging.Logger method, which Dynamo "
                                   "does not trace, and breaks the graph")
    elif (q.startswith("time.") and q.count(".") == 1) or q in DATETIME_NOW:
        ctx.report("MND104", call, f"`{q}()` {CLOCK_MESSAGE}")
    elif q in RANDOM_BREAKING:
        ctx.report("MND105", call, f"`{q}()` in compiled code: Python's random generator is C code Dynamo "
                                   "skips, so the graph breaks")
    elif q in ("builtins.str", "builtins.repr") and call.args and ctx.kind(call.args[0]) == tk.T:
        ctx.report("MND109", call, f"`{q[9:]}(tensor)` in compiled code: Dynamo cannot trace tensor formatting "
                                   "and breaks the graph")
    elif q == "builtins.open" and not ctx.in_with_item(call):
        ctx.report("MND110", call)


def _tensor_fstring(ctx: Context, e: ast.AST) -> bool:
    if isinstance(e, ast.Name):
        e = ctx.local_values.get(e.id)
    if not isinstance(e, ast.JoinedStr):
        return False
    return any(isinstance(v, ast.FormattedValue) and ctx.kind(v.value) == tk.T for v in e.values)


@checker("call")
def consumed_tensor_fstring(ctx: Context, call: ast.Call) -> None:
    """``len(f"{t}")``: Dynamo formats f-strings lazily; using the text makes it raise (GB0088)."""
    if ctx.qualify(call.func) in ("builtins.len", "builtins.hash") and call.args and _tensor_fstring(ctx, call.args[0]):
        ctx.report("MND109", call, "the text of an f-string holding a tensor is used in compiled code: Dynamo "
                                   "cannot format tensors, raises inside the frame and skips the whole function")
