"""MND1xx: side effects Dynamo cannot put in a graph (print, logging, warnings, time, random, ...)."""

from __future__ import annotations

import ast

from mend.analyzers.static import tensors as tk
from mend.analyzers.static.rules.base import Rule, checker, register

_HDR = "import torch\nfrom torch import nn\n"

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
    ),
    Rule(
        "MND102", "logger-call-in-compiled-code",
        "logging.Logger method in compiled code: Dynamo does not trace Logger methods and breaks the graph",
        ("GB0291",), "break",
        what="""
            Finds calls to `logging.Logger` methods (`debug`, `info`, `warning`, `error`, ...,
            and transformers' `warning_once`/`info_once`) on loggers created with
            `logging.getLogger(...)` or a library `get_logger(...)`, and calls to the `logging`
            module functions, in traced code.
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
    ),
    Rule(
        "MND105", "python-random-in-compiled-code",
        "Python `random` call in compiled code: Dynamo cannot trace the C random generator and breaks the graph",
        ("GB0007",), "break",
        what="""
            Finds calls to Python's `random` module (`random.random`, `gauss`, `choice`, `shuffle`,
            `sample`, `normalvariate`, `getrandbits`, `seed`) in traced code. `random.randint`,
            `randrange` and `uniform` are traced by Dynamo and are not reported.
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
        what="Finds `copy.deepcopy(...)` calls in traced code.",
        why="Dynamo does not trace `copy.deepcopy` of tensors (GB4198) or other objects (GB0179).",
        use_instead="Use `t.clone()` for tensors; copy modules outside the compiled region.",
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

LOGGER_METHODS = frozenset(
    "debug info warning warn error exception critical fatal log warning_once info_once warning_advice".split()
)
LOGGING_FUNCS = frozenset(f"logging.{m}" for m in "debug info warning warn error exception critical fatal log".split())
RANDOM_BREAKING = frozenset(
    f"random.{n}" for n in "random gauss choice choices shuffle sample normalvariate getrandbits seed "
    "betavariate expovariate gammavariate lognormvariate paretovariate triangular vonmisesvariate weibullvariate"
    .split()
)
DATETIME_NOW = frozenset(
    f"datetime.{a}{b}" for a in ("datetime.", "date.", "") for b in ("now", "utcnow", "today")
)
DEBUGGERS = frozenset({"pdb.set_trace", "ipdb.set_trace", "builtins.breakpoint", "pdb.Pdb", "pudb.set_trace"})


def _with_context_expr(w, call: ast.Call) -> bool:
    return id(call) in getattr(w, "_with_items", set())


@checker("call")
def side_effect_calls(w, call: ast.Call) -> None:
    f = call.func
    q = w.qualify(f)
    if q is not None:
        if q == "builtins.print":
            w.report("MND101", call)
        elif q in LOGGING_FUNCS:
            w.report("MND102", call, f"`{q}()` in compiled code: it calls a logging.Logger method, which Dynamo "
                                     "does not trace, and breaks the graph")
        elif q == "warnings.warn":
            w.report("MND103", call)
        elif q.startswith("time.") and q.count(".") == 1:
            w.report("MND104", call, f"`{q}()` in compiled code: Dynamo cannot trace the clock and breaks the graph")
        elif q in DATETIME_NOW:
            w.report("MND104", call, f"`{q}()` in compiled code: Dynamo cannot trace the clock and breaks the graph")
        elif q in RANDOM_BREAKING:
            w.report("MND105", call, f"`{q}()` in compiled code: Python's random generator is C code Dynamo "
                                     "skips, so the graph breaks")
        elif q in DEBUGGERS:
            w.report("MND106", call)
        elif q == "torch.save":
            w.report("MND107", call)
        elif q == "copy.deepcopy":
            w.report("MND108", call)
        elif q in ("builtins.str", "builtins.repr") and call.args and w.kind(call.args[0]) == tk.T:
            w.report("MND109", call, f"`{q[9:]}(tensor)` in compiled code: Dynamo cannot trace tensor formatting "
                                     "and breaks the graph")
        elif q == "builtins.open" and not _with_context_expr(w, call):
            w.report("MND110", call)
        return
    if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
        v = w.local_values.get(f.value.id)
        if isinstance(v, ast.Call) and w.qualify(v.func) == "builtins.open":
            w.report("MND110", call, f"`.{f.attr}()` on a file object in compiled code: Dynamo cannot trace file "
                                     "I/O and breaks the graph")
            return
    if isinstance(f, ast.Attribute) and f.attr in LOGGER_METHODS and w.is_logger(f.value):
        w.report("MND102", call, f"`.{f.attr}()` on a logging.Logger in compiled code: Dynamo does not trace "
                                 "Logger methods and breaks the graph")


def _tensor_fstring(w, e: ast.AST) -> bool:
    if isinstance(e, ast.Name):
        e = w.local_values.get(e.id)
    if not isinstance(e, ast.JoinedStr):
        return False
    return any(isinstance(v, ast.FormattedValue) and w.kind(v.value) == tk.T for v in e.values)


@checker("call")
def consumed_tensor_fstring(w, call: ast.Call) -> None:
    """``len(f"{t}")``: Dynamo formats f-strings lazily; using the text makes it raise (GB0088)."""
    if w.qualify(call.func) in ("builtins.len", "builtins.hash") and call.args and _tensor_fstring(w, call.args[0]):
        w.report("MND109", call, "the text of an f-string holding a tensor is used in compiled code: Dynamo "
                                 "cannot format tensors, raises inside the frame and skips the whole function")
