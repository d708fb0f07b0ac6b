"""MND4xx: code that makes Dynamo compile the same frame again (recompile triggers).

MND401 is found inside traced code. MND402-MND405 are found where compiled objects are *created
and called* (driver code: training loops, scripts), which is usually not traced itself; the file
checker :func:`driver_recompiles` looks at every scope of a file that mentions ``compile``.
"""

from __future__ import annotations

import ast

from mend.analyzers.diagnostic import Severity
from mend.analyzers.static.names import Scope
from mend.analyzers.static.rules.base import RULES, FixInfo, Rule, checker, file_checker, register
from mend.analyzers.static.rules.context import Context, DriverScope, FileContext
from mend.analyzers.static.torch_facts import COMPILE_NAMES

_HDR = "import torch\nfrom torch import nn\n"

register(
    Rule(
        "MND401", "module-int-attribute-mutated-in-forward",
        "int attribute of the module mutated in compiled code: Dynamo specializes on module ints and "
        "recompiles on every new value",
        ("recompile",), "recompile", severity=Severity.WARNING,
        what="Finds `self.<attr> += 1`-style updates of integer attributes of a module in traced code.",
        why="""
            `torch.compile` treats integer attributes of an `nn.Module` as constants
            (`allow_unspec_int_on_nn_module=False`) and guards on their value: every call sees a new
            value and compiles again, until the recompile limit (8) makes the frame run eagerly.
        """,
        use_instead="""
            Keep the counter in a buffer and update it in place:

            ```python
            self.register_buffer("step", torch.zeros((), dtype=torch.long))
            ...
            self.step += 1
            ```
        """,
        invalid=(_HDR + """
            class M(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.step = 0

                def forward(self, x):
                    self.step += 1
                    return x * self.step
        """,),
        valid=(_HDR + """
            class M(nn.Module):
                def __init__(self):
                    super().__init__()
                    self.register_buffer("step", torch.zeros((), dtype=torch.long))

                def forward(self, x):
                    self.step += 1
                    return x * self.step
        """,),
        fix=FixInfo(
            "sometimes", "unsafe", "int/float attribute -> registered buffer updated in place",
            "`self.step = 0` in `__init__` becomes a non-persistent buffer (`torch.tensor(0)`), `self.step += "
            "1` stays (in place), `min`/`max` around its value become `torch.clamp`. **Unsafe**: the attribute "
            "is a tensor for code outside the class. Declines when the value reaches control flow, another "
            "call, a return, or is rebound with `=`.",
            strategies=("buffer_attribute",),
        ),
    ),
    Rule(
        "MND402", "varying-python-scalar-argument",
        "compiled function called with varying Python numbers: Dynamo specializes on the value and recompiles",
        ("recompile",), "recompile", severity=Severity.WARNING,
        what="""
            Finds calls of one compiled function or module with different Python int/float literals in the
            same argument position, or with a loop variable counting numbers.
        """,
        why="""
            Dynamo first specializes on the value of a Python scalar argument; a new value fails the
            guard (`n == 2`) and compiles the frame again (then once more as a dynamic value).
        """,
        use_instead="Pass the number as a 0-d tensor (`torch.tensor(n)`), or compile with `dynamic=True`.",
        invalid=(_HDR + """
            def scale(x, n):
                return x * n

            f = torch.compile(scale)
            f(torch.ones(2), 2)
            f(torch.ones(2), 3)
        """,),
        valid=(_HDR + """
            def scale(x, n):
                return x * n

            f = torch.compile(scale)
            f(torch.ones(2), torch.tensor(2))
            f(torch.ones(2), torch.tensor(3))
        """,),
        fix=FixInfo(
            "sometimes", "unsafe", "compile with dynamic=True",
            "When the compiled object is defined in the same file (`name = torch.compile(target, ...)` or an "
            "`@torch.compile` decorator) without `dynamic=`, `dynamic=True` is added there (`@torch.compile` "
            "becomes `@torch.compile(dynamic=True)`): Dynamo traces the ints/floats symbolically from the "
            "first compile, so new values do not recompile (tensor sizes 0 and 1 are still specialized; an "
            "argument switching between int and float still recompiles). **Unsafe**: outputs are unchanged, "
            "but dynamic shapes apply to every input and can change performance or, rarely, raise where static "
            "tracing did not. Declines when `dynamic=` or `**options` is already given, the name is compiled "
            "in more than one place, or the definition is not in the file; then pass the number as a 0-d "
            "tensor (`torch.tensor(n)`).",
            strategies=("dynamic_compile",),
        ),
    ),
    Rule(
        "MND403", "compile-in-loop",
        "`torch.compile` re-created in a loop or a repeatedly called function with a changing closure or "
        "backend: every new wrapper compiles again",
        ("recompile",), "recompile", severity=Severity.WARNING,
        what="""
            Finds `torch.compile(...)` calls inside a loop, or inside a function that is called
            repeatedly, whose target is a lambda or nested function capturing the loop variable or the
            function's parameters, or whose `backend=` is a new callable each time.
        """,
        why="""
            Re-wrapping the *same* function with the same backend is cheap (Dynamo caches on the code
            object), but a closure over a changing value fails a value guard, and a new backend
            callable fails the backend guard: both compile again, every time.
        """,
        use_instead="Create the compiled function once, outside the loop, and pass changing values as arguments.",
        invalid=(_HDR + """
            x = torch.ones(3)
            for scale in (1.0, 2.0, 3.0):
                f = torch.compile(lambda t: t * scale)
                f(x)
        """,),
        valid=(_HDR + """
            x = torch.ones(3)
            f = torch.compile(lambda t, s: t * s)
            for scale in (1.0, 2.0, 3.0):
                f(x, torch.tensor(scale))
        """,),
        fix=FixInfo(
            "sometimes", "safe", "hoist torch.compile out of the loop",
            "`name = torch.compile(expr)` directly in a loop body is moved before the loop when its arguments "
            "are not rebound in the loop (**safe**: the same object, compiled once).",
            strategies=("hoist_compile",),
        ),
    ),
    Rule(
        "MND404", "train-eval-toggle",
        "`train()`/`eval()` toggled on a compiled module: the `training` flag is guarded and each mode compiles "
        "once more",
        ("recompile",), "recompile", severity=Severity.WARNING,
        what="Finds a compiled module (or the module it wraps) switched between `train()` and `eval()` in one scope.",
        why="""
            Dynamo guards on `module.training` (for example through dropout and batch norm): the first
            call in the other mode fails the guard and compiles again.
        """,
        use_instead="""
            Expected in train/validate loops (one extra compile, then both graphs are cached). To avoid
            it, compile separate wrappers for training and evaluation.
        """,
        invalid=(_HDR + """
            model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))
            compiled = torch.compile(model)
            x = torch.ones(2, 4)
            model.train()
            compiled(x)
            model.eval()
            compiled(x)
        """,),
        valid=(_HDR + """
            model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1)).eval()
            compiled = torch.compile(model)
            x = torch.ones(2, 4)
            compiled(x)
            compiled(x)
        """,),
    ),
    Rule(
        "MND405", "changing-dtype",
        "compiled object called with tensors of different dtypes: the dtype is guarded and each one compiles again",
        ("recompile",), "recompile", severity=Severity.WARNING,
        what="Finds calls of one compiled function or module whose arguments are cast to different dtypes.",
        why="Dynamo guards on each input's dtype: every new dtype fails the guard and compiles again.",
        use_instead="Cast to one dtype before the compiled boundary (`x.float()`), or compile one wrapper per dtype.",
        invalid=(_HDR + """
            f = torch.compile(torch.sin)
            x = torch.ones(3)
            f(x.float())
            f(x.half())
        """,),
        valid=(_HDR + """
            f = torch.compile(torch.sin)
            x = torch.ones(3)
            f(x.float())
            f(x.half().float())
        """,),
    ),
)


@checker("augassign")
def int_attr_augassign(ctx: Context, node: ast.AugAssign) -> None:
    attr = ctx.is_self_attr(node.target)
    if attr is None or ctx.facts is None:
        return
    if attr in ctx.facts.tensor_attrs or attr in ctx.facts.module_attrs:
        return
    value_is_int = isinstance(node.value, ast.Constant) and type(node.value.value) is int
    if attr in ctx.facts.int_attrs or value_is_int:
        ctx.report("MND401", node, f"`self.{attr}` is an int attribute of the module mutated in compiled code: "
                                   "Dynamo specializes on its value and recompiles on every call")


@checker("assign")
def int_attr_assign(ctx: Context, node: ast.Assign) -> None:
    if len(node.targets) != 1 or ctx.facts is None:
        return
    attr = ctx.is_self_attr(node.targets[0])
    if attr is None or attr in ctx.facts.tensor_attrs or attr not in ctx.facts.int_attrs:
        return
    v = node.value
    if isinstance(v, ast.BinOp) and ctx.is_self_attr(v.left) == attr:
        ctx.report("MND401", node, f"`self.{attr}` is an int attribute of the module mutated in compiled code: "
                                   "Dynamo specializes on its value and recompiles on every call")


# --------------------------------------------------------------------------------------------
# driver code: where compiled objects are created and called

DTYPE_METHODS = {"half": "float16", "float": "float32", "double": "float64", "bfloat16": "bfloat16",
                 "long": "int64", "int": "int32"}
TRAINING_MODULES = ("Dropout", "BatchNorm", "AlphaDropout", "FeatureAlphaDropout", "InstanceNorm", "SyncBatchNorm")

CallSites = list[tuple[ast.Call, tuple, Scope, "str | None"]]  # (call, enclosing loops, scope, scope id)


@file_checker
def driver_recompiles(file: FileContext) -> None:
    """MND402-MND405 in every scope of a file that mentions ``compile`` (traced or not)."""
    if not file.has_compile:
        return
    scopes = file.driver_scopes()
    called = _call_counts(file, scopes[0])
    compiled, dynamic = _compiled_functions(file)
    for ds in scopes:
        _compile_in_loops(file, ds, called)
        _compiled_names(ds, compiled, dynamic)
    if not compiled:
        return
    calls, toggles = _calls_of_compiled(scopes, compiled)
    for name, sites in calls.items():
        if name not in dynamic:
            _varying_scalars(file, name, sites)
        _varying_dtypes(file, name, sites)
    for name, ts in toggles.items():
        if name in calls and _training_dependent(file, name, compiled, scopes):
            _train_eval_toggle(file, name, ts)


def _call_counts(file: FileContext, module_scope: DriverScope) -> dict[str, int]:
    """How often each function of this module is called, counting a call from a loop twice ("called
    repeatedly"): module-level code from its nodes, functions from the call sites the walker recorded."""
    called: dict[str, int] = {}
    for n, loops in module_scope.nodes:
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            called[n.func.id] = called.get(n.func.id, 0) + (2 if loops else 1)
    prefix = f"{file.module}." if file.module else ""
    for fn in file.summary.functions.values():
        for site in fn.calls:
            if site.ref[0] == "qual" and site.ref[1].startswith(prefix) and "." not in site.ref[1][len(prefix):]:
                name = site.ref[1][len(prefix):]
                called[name] = called.get(name, 0) + (2 if site.in_loop else 1)
    return called


def _compiled_functions(file: FileContext) -> tuple[dict[str, str | None], set[str]]:
    """Module-level functions decorated with ``torch.compile`` (compiled name -> the name it wraps), and
    those compiled with ``dynamic=True``, which take Python numbers symbolically (no MND402)."""
    compiled: dict[str, str | None] = {}
    for info in file.summary.functions.values():
        if info.compiled and info.parent is None and info.cls is None:
            compiled[info.name] = None
    dynamic: set[str] = set()
    for info, node, fscope, _env in file.func_nodes:
        if info.parent is None and info.cls is None and info.compiled:
            if any(isinstance(d, ast.Call) and fscope.qualify(d.func) in COMPILE_NAMES and _dynamic_true(d)
                   for d in node.decorator_list):
                dynamic.add(info.name)
    return compiled, dynamic


def _compiled_names(ds: DriverScope, compiled: dict[str, str | None], dynamic: set[str]) -> None:
    """``name = torch.compile(target, ...)`` in one scope."""
    for n, _loops in ds.nodes:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
            v = n.value
            if isinstance(v, ast.Call) and ds.scope.qualify(v.func) in COMPILE_NAMES:
                under = v.args[0].id if v.args and isinstance(v.args[0], ast.Name) else None
                compiled[n.targets[0].id] = under
                if _dynamic_true(v):
                    dynamic.add(n.targets[0].id)


def _calls_of_compiled(scopes: list[DriverScope], compiled: dict[str, str | None]):
    """Calls of each compiled name, and ``train()``/``eval()`` on it (or on the module it wraps)."""
    calls: dict[str, CallSites] = {}
    toggles: dict[str, list[tuple[ast.Call, bool, str | None]]] = {}
    wrapped = {u: c for c, u in compiled.items() if u}
    for ds in scopes:
        fid = ds.info.id if ds.info else None
        for n, loops in ds.nodes:
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            if isinstance(f, ast.Name) and f.id in compiled:
                calls.setdefault(f.id, []).append((n, loops, ds.scope, fid))
            elif isinstance(f, ast.Attribute) and f.attr in ("train", "eval") and isinstance(f.value, ast.Name):
                name = f.value.id
                key = name if name in compiled else wrapped.get(name)
                if key is None:
                    continue
                mode = f.attr == "train" and not (n.args and isinstance(n.args[0], ast.Constant)
                                                  and n.args[0].value is False)
                toggles.setdefault(key, []).append((n, mode, fid))
    return calls, toggles


def _train_eval_toggle(file: FileContext, name: str, ts: list[tuple[ast.Call, bool, str | None]]) -> None:
    ts.sort(key=lambda t: (t[0].lineno, t[0].col_offset))
    first_mode = ts[0][1]
    for call, mode, fid in ts[1:]:
        if mode != first_mode:
            file.report("MND404", call, fid, f"`{name}` is switched between train() and eval(): Dynamo guards on "
                                             "the `training` flag and compiles once more for the other mode")
            break


def _training_dependent(file: FileContext, name: str, compiled: dict, scopes: list[DriverScope]) -> bool:
    """Whether the module behind ``name`` reads its ``training`` flag (so toggling it is guarded).

    True for instances of classes of this file whose methods read ``self.training`` or which hold
    dropout/batch-norm layers, and for ``nn.Sequential(...)``-style expressions containing such
    layers. Unknown modules are not reported (precision over recall).
    """
    target = compiled.get(name) or name
    values = [n.value for ds in scopes for n, _loops in ds.nodes
              if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id in (target, name)
                                                   for t in n.targets)]
    for v in values:
        if isinstance(v, ast.Call) and v.args and file.scope.qualify(v.func) in COMPILE_NAMES:
            v = v.args[0]
        for sub in ast.walk(v):
            if isinstance(sub, ast.Call) and _training_call(file, sub):
                return True
    return False


def _training_call(file: FileContext, call: ast.Call) -> bool:
    """A dropout/batch-norm layer, or an instance of a class of this file that reads ``training``."""
    q = file.scope.qualify(call.func) or ""
    if q.startswith("torch.nn.") and q.rsplit(".", 1)[-1].startswith(TRAINING_MODULES):
        return True
    local = q[len(file.module) + 1:] if q.startswith(file.module + ".") else None
    return local in file.summary.classes and _class_reads_training(file, local)


def _class_reads_training(file: FileContext, cls: str) -> bool:
    for info, node, scope, _env in file.func_nodes:
        if info.cls != cls:
            continue
        for sub in ast.walk(node):
            if isinstance(sub, ast.Attribute) and sub.attr == "training":
                return True
            if isinstance(sub, ast.Call):
                q = scope.qualify(sub.func) or ""
                if q.startswith("torch.nn.") and q.rsplit(".", 1)[-1].startswith(TRAINING_MODULES):
                    return True
                if q.startswith("torch.nn.functional.") and "dropout" in q:
                    return True
    return False


def _compile_in_loops(file: FileContext, ds: DriverScope, called: dict[str, int]) -> None:
    """MND403: ``torch.compile(...)`` of a changing closure or with a new backend, in a loop or in a
    function called repeatedly."""
    nested = _nested_defs(ds)
    params: set[str] = set()
    if ds.node is not None:
        a = ds.node.args
        params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
    fid = ds.info.id if ds.info else None
    for n, loops in ds.nodes:
        if isinstance(n, ast.Call) and n.args and ds.scope.qualify(n.func) in COMPILE_NAMES:
            _check_compile_in_loop(file, n, loops, nested, params, ds.node, called, fid)


def _nested_defs(ds: DriverScope) -> dict[str, ast.AST]:
    """Lambdas assigned to names, and functions defined, in the scope (what ``torch.compile`` may wrap)."""
    nested: dict[str, ast.AST] = {}
    for n, _loops in ds.nodes:
        if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) \
                and isinstance(n.value, ast.Lambda):
            nested[n.targets[0].id] = n.value
    if ds.node is not None:
        for s in ast.walk(ds.node):
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s is not ds.node:
                nested[s.name] = s
    else:
        for s in ds.body:
            if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                nested[s.name] = s
    return nested


def _check_compile_in_loop(file: FileContext, call: ast.Call, loops: tuple, nested: dict, params: set, fnode,
                           called: dict, fid) -> None:
    backend = next((k.value for k in call.keywords if k.arg == "backend"), None)
    target = call.args[0]
    target_def = target if isinstance(target, ast.Lambda) else (
        nested.get(target.id) if isinstance(target, ast.Name) else None)
    captured = _free_names(target_def) if target_def is not None else set()
    new_backend = isinstance(backend, (ast.Lambda, ast.Call))
    if loops:
        varying = _loop_names(loops)
        if new_backend or (captured & varying):
            why = "a new backend callable" if new_backend else "a closure over the loop variable"
            file.report("MND403", call, fid, f"`torch.compile` inside a loop with {why}: each iteration fails a "
                                             "guard and compiles again")
        return
    if fnode is not None and called.get(fnode.name, 0) >= 2 and (new_backend or (captured & params)):
        why = "a new backend callable" if new_backend else "a closure over its parameters"
        file.report("MND403", call, fid, f"`torch.compile` in `{fnode.name}()`, which is called repeatedly, with "
                                         f"{why}: each call fails a guard and compiles again")


def _loop_names(loops: tuple) -> set[str]:
    out: set[str] = set()
    for lp in loops:
        if isinstance(lp, (ast.For, ast.AsyncFor)):
            for n in ast.walk(lp.target):
                if isinstance(n, ast.Name):
                    out.add(n.id)
    return out


def _numeric_loop_names(loops: tuple) -> set[str]:
    """Loop variables that count numbers: ``for i in range(...)`` / ``for s in (1.0, 2.0)``."""
    out: set[str] = set()
    for lp in loops:
        if not isinstance(lp, (ast.For, ast.AsyncFor)) or not isinstance(lp.target, ast.Name):
            continue
        it = lp.iter
        numeric = (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range") or (
            isinstance(it, (ast.Tuple, ast.List)) and it.elts and all(_number(e) is not None for e in it.elts))
        if numeric:
            out.add(lp.target.id)
    return out


def _number(e: ast.AST) -> float | None:
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub):
        v = _number(e.operand)
        return None if v is None else -v
    if isinstance(e, ast.Constant) and type(e.value) in (int, float):
        return e.value
    return None


def _free_names(fn: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(fn) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}


def _dtype_of(e: ast.AST, scope: Scope) -> str | None:
    if not isinstance(e, ast.Call):
        return None
    f = e.func
    if isinstance(f, ast.Attribute) and f.attr in DTYPE_METHODS and not e.args:
        return DTYPE_METHODS[f.attr]
    if isinstance(f, ast.Attribute) and f.attr in ("to", "type"):
        for a in [*e.args, *(k.value for k in e.keywords if k.arg == "dtype")]:
            q = scope.qualify(a)
            if q and q.startswith("torch.") and q.count(".") == 1:
                return q[6:]
    for k in e.keywords:
        if k.arg == "dtype":
            q = scope.qualify(k.value)
            if q and q.startswith("torch."):
                return q[6:]
    return None


def _dynamic_true(call: ast.Call) -> bool:
    """``torch.compile(..., dynamic=True)``."""
    return any(k.arg == "dynamic" and isinstance(k.value, ast.Constant) and k.value.value is True
               for k in call.keywords)


def _keyed_args(call: ast.Call) -> list[tuple[object, ast.AST]]:
    """Arguments by position or keyword name."""
    return [(i, a) for i, a in enumerate(call.args)] + [(k.arg, k.value) for k in call.keywords if k.arg]


def _varying_scalars(file: FileContext, name: str, sites: CallSites) -> None:
    seen: dict[object, float] = {}
    for call, loops, _scope, fid in sites:
        numeric_loop = _numeric_loop_names(loops)
        for key, arg in _keyed_args(call):
            v = _number(arg)
            if v is not None:
                if key in seen and seen[key] != v:
                    file.report("MND402", call, fid, f"`{name}` is called with different Python numbers "
                                                     f"({seen[key]!r}, then {v!r}) for the same argument: Dynamo "
                                                     "specializes on the value and recompiles")
                seen.setdefault(key, v)
            elif isinstance(arg, ast.Name) and arg.id in numeric_loop:
                file.report("MND402", call, fid, f"`{name}` is called with the loop counter `{arg.id}` (a Python "
                                                 "number): Dynamo specializes on the value and recompiles")


def _varying_dtypes(file: FileContext, name: str, sites: CallSites) -> None:
    seen: dict[object, str] = {}
    for call, _loops, scope, fid in sites:
        for key, arg in _keyed_args(call):
            dt = _dtype_of(arg, scope)
            if dt is None:
                continue
            if key in seen and seen[key] != dt:
                file.report("MND405", call, fid, f"`{name}` is called with a {dt} tensor after a {seen[key]} one: "
                                                 "Dynamo guards on dtypes and compiles again")
            seen.setdefault(key, dt)


assert all(RULES[c].kind == "recompile" for c in ("MND401", "MND402", "MND403", "MND404", "MND405"))
