"""MND4xx: code that makes Dynamo compile the same frame again (recompile triggers).

MND401 is found inside traced code. MND402-MND405 are found where compiled objects are *created
and called* (driver code: training loops, scripts), which is usually not traced itself; they are
checked in every scope of a file by :func:`check_drivers`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from mend.analyzers.diagnostic import Severity
from mend.analyzers.static.rules.base import RULES, Finding, Rule, checker, register

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
def int_attr_augassign(w, node: ast.AugAssign) -> None:
    attr = w.is_self_attr(node.target)
    if attr is None or w.facts is None:
        return
    if attr in w.facts.tensor_attrs or attr in w.facts.module_attrs:
        return
    value_is_int = isinstance(node.value, ast.Constant) and type(node.value.value) is int
    if attr in w.facts.int_attrs or value_is_int:
        w.report("MND401", node, f"`self.{attr}` is an int attribute of the module mutated in compiled code: "
                                 "Dynamo specializes on its value and recompiles on every call")


@checker("assign")
def int_attr_assign(w, node: ast.Assign) -> None:
    if len(node.targets) != 1 or w.facts is None:
        return
    attr = w.is_self_attr(node.targets[0])
    if attr is None or attr in w.facts.tensor_attrs or attr not in w.facts.int_attrs:
        return
    v = node.value
    if isinstance(v, ast.BinOp) and w.is_self_attr(v.left) == attr:
        w.report("MND401", node, f"`self.{attr}` is an int attribute of the module mutated in compiled code: "
                                 "Dynamo specializes on its value and recompiles on every call")


# --------------------------------------------------------------------------------------------
# driver code

DTYPE_METHODS = {"half": "float16", "float": "float32", "double": "float64", "bfloat16": "bfloat16",
                 "long": "int64", "int": "int32"}


def _walk(node: ast.AST) -> Iterator[ast.AST]:
    from mend.analyzers.static.names import children

    stack = [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(children(n))


def _scope_stmts(body: list[ast.stmt], loops: tuple) -> Iterator[tuple[ast.AST, tuple]]:
    """Nodes of one scope (not descending into nested functions/classes), with enclosing loops."""
    for s in body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            header = [s.iter, s.target] if isinstance(s, (ast.For, ast.AsyncFor)) else [s.test]
            for h in header:
                for n in _walk(h):
                    yield n, loops
            yield from _scope_stmts(s.body, loops + (s,))
            yield from _scope_stmts(s.orelse, loops)
            continue
        sub_bodies = []
        for field in ("body", "orelse", "finalbody", "handlers", "cases"):
            part = getattr(s, field, None)
            if isinstance(part, list) and part and isinstance(part[0], (ast.stmt, ast.excepthandler, ast.match_case)):
                sub_bodies.append(part)
        if sub_bodies:
            for child in ast.iter_child_nodes(s):
                if isinstance(child, ast.expr) or isinstance(child, ast.withitem):
                    for n in _walk(child):
                        yield n, loops
            for part in sub_bodies:
                for item in part:
                    if isinstance(item, (ast.excepthandler, ast.match_case)):
                        yield from _scope_stmts(item.body, loops)
                    else:
                        yield from _scope_stmts([item], loops)
            continue
        for n in _walk(s):
            if isinstance(n, (ast.Lambda,)):
                continue
            yield n, loops


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


def _dtype_of(e: ast.AST, scope) -> str | None:
    if isinstance(e, ast.Call):
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


def check_drivers(mod) -> None:
    from mend.analyzers.static.summary import CompileSite
    from mend.analyzers.static.visitor import COMPILE_NAMES

    lines = mod.index.lines

    def text_of(node) -> str:
        if node is None:
            return mod.source
        return "\n".join(lines[node.lineno - 1:(node.end_lineno or node.lineno)])

    scopes = [(mod.tree.body, mod.scope, None, None, None)]
    for info, node, fscope, _env in mod.func_nodes:
        if "compile" not in text_of(node):
            continue  # a scope that never mentions compile creates no compiled object
        self_name = node.args.args[0].arg if (info.cls and node.args.args) else None
        scopes.append((node.body, fscope, info, self_name, node))
    scope_nodes = [list(_scope_stmts(body, ())) for body, *_ in scopes]
    # how often each function of this module is called, and whether from a loop ("repeatedly called"):
    # module-level code from its nodes, functions from the call sites the walker recorded
    called: dict[str, int] = {}
    for n, loops in scope_nodes[0]:
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            called[n.func.id] = called.get(n.func.id, 0) + (2 if loops else 1)
    prefix = f"{mod.module}." if mod.module else ""
    for fn in mod.summary.functions.values():
        for site in fn.calls:
            if site.ref[0] == "qual" and site.ref[1].startswith(prefix) and "." not in site.ref[1][len(prefix):]:
                name = site.ref[1][len(prefix):]
                called[name] = called.get(name, 0) + (2 if site.in_loop else 1)

    compiled: dict[str, str | None] = {}  # compiled name -> the name it wraps
    for fid, info in mod.summary.functions.items():
        if info.compiled and info.parent is None and info.cls is None:
            compiled[info.name] = None
    # Compiled objects traced with dynamic=True take Python numbers symbolically: no MND402 for them.
    dynamic: set[str] = set()
    for info, fnode_, fscope, _env in mod.func_nodes:
        if info.parent is None and info.cls is None and info.compiled:
            if any(isinstance(d, ast.Call) and fscope.qualify(d.func) in COMPILE_NAMES and _dynamic_true(d)
                   for d in fnode_.decorator_list):
                dynamic.add(info.name)
    per_scope = []
    for (body, scope, info, self_name, fnode), nodes in zip(scopes, scope_nodes):
        local_values: dict[str, object] = {}
        nested_defs: dict[str, ast.AST] = {}
        for n, _loops in nodes:
            if isinstance(n, ast.Assign) and len(n.targets) == 1:
                t = n.targets[0]
                if isinstance(t, ast.Name):
                    local_values[t.id] = n.value
                    if isinstance(n.value, ast.Lambda):
                        nested_defs[t.id] = n.value
                elif isinstance(t, ast.Tuple) and isinstance(n.value, ast.Call):
                    for i, e in enumerate(t.elts):
                        if isinstance(e, ast.Name):
                            local_values[e.id] = (n.value, i)
        if fnode is not None:
            for s in ast.walk(fnode):
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s is not fnode:
                    nested_defs[s.name] = s
        else:
            for s in body:
                if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    nested_defs[s.name] = s
        params = set()
        if fnode is not None:
            a = fnode.args
            params = {x.arg for x in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
        fid = info.id if info else None
        cls = info.cls if info else None
        for n, loops in nodes:
            if not isinstance(n, ast.Call):
                continue
            q = scope.qualify(n.func)
            if q in COMPILE_NAMES and n.args:
                target = mod.ref_of(n.args[0], scope, cls, self_name, local_values)
                line, col, _, _ = mod.span(n)
                mod.summary.compile_sites.append(CompileSite(line, col, "call", target, fid))
                _check_compile_in_loop(mod, n, loops, nested_defs, params, fnode, called, fid)
            elif (isinstance(n.func, ast.Attribute) and n.func.attr == "compile" and not n.args
                  and not isinstance(n.func.value, ast.Call)):
                target = mod.ref_of(n.func.value, scope, cls, self_name, local_values)
                if target is not None and target[0] == "instance":
                    line, col, _, _ = mod.span(n)
                    mod.summary.compile_sites.append(CompileSite(line, col, "method", target, fid))
        for n, _loops in nodes:
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                v = n.value
                if isinstance(v, ast.Call) and scope.qualify(v.func) in COMPILE_NAMES:
                    under = v.args[0].id if v.args and isinstance(v.args[0], ast.Name) else None
                    compiled[n.targets[0].id] = under
                    if _dynamic_true(v):
                        dynamic.add(n.targets[0].id)
        per_scope.append((nodes, scope, fid))
    if not compiled:
        return
    calls: dict[str, list[tuple[ast.Call, tuple, object, str | None]]] = {}
    toggles: dict[str, list[tuple[ast.Call, bool, str | None]]] = {}
    wrapped = {u: c for c, u in compiled.items() if u}
    for nodes, scope, fid in per_scope:
        for n, loops in nodes:
            if not isinstance(n, ast.Call):
                continue
            f = n.func
            if isinstance(f, ast.Name) and f.id in compiled:
                calls.setdefault(f.id, []).append((n, loops, scope, fid))
            elif isinstance(f, ast.Attribute) and f.attr in ("train", "eval") and isinstance(f.value, ast.Name):
                name = f.value.id
                key = name if name in compiled else wrapped.get(name)
                if key is None:
                    continue
                mode = f.attr == "train" and not (n.args and isinstance(n.args[0], ast.Constant)
                                                  and n.args[0].value is False)
                toggles.setdefault(key, []).append((n, mode, fid))
    for name, sites in calls.items():
        if name not in dynamic:
            _varying_scalars(mod, name, sites)
        _varying_dtypes(mod, name, sites)
    for name, ts in toggles.items():
        if name not in calls or not _training_dependent(mod, name, compiled, per_scope):
            continue
        ts.sort(key=lambda t: (t[0].lineno, t[0].col_offset))
        first_mode = ts[0][1]
        for call, mode, fid in ts[1:]:
            if mode != first_mode:
                _driver_report(mod, "MND404", call, fid,
                               f"`{name}` is switched between train() and eval(): Dynamo guards on the `training` "
                               "flag and compiles once more for the other mode")
                break


TRAINING_MODULES = ("Dropout", "BatchNorm", "AlphaDropout", "FeatureAlphaDropout", "InstanceNorm", "SyncBatchNorm")


def _training_dependent(mod, name: str, compiled: dict, per_scope) -> bool:
    """Whether the module behind ``name`` reads its ``training`` flag (so toggling it is guarded).

    True for instances of classes of this file whose methods read ``self.training`` or which hold
    dropout/batch-norm layers, and for ``nn.Sequential(...)``-style expressions containing such
    layers. Unknown modules are not reported (precision over recall).
    """
    target = compiled.get(name) or name
    values = []
    for nodes, _scope, _fid in per_scope:
        for n, _loops in nodes:
            if isinstance(n, ast.Assign) and any(isinstance(t, ast.Name) and t.id in (target, name)
                                                 for t in n.targets):
                values.append(n.value)
    for v in values:
        if isinstance(v, ast.Call) and v.args and mod.scope.qualify(v.func) == "torch.compile":
            v = v.args[0]
        for sub in ast.walk(v):
            if isinstance(sub, ast.Call):
                q = mod.scope.qualify(sub.func) or ""
                tail = q.rsplit(".", 1)[-1]
                if q.startswith("torch.nn.") and tail.startswith(TRAINING_MODULES):
                    return True
                local = q[len(mod.module) + 1:] if q.startswith(mod.module + ".") else None
                if local in mod.summary.classes and _class_reads_training(mod, local):
                    return True
    return False


def _class_reads_training(mod, cls: str) -> bool:
    for _info, node, scope, _env in mod.func_nodes:
        if _info.cls != cls:
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


def _driver_report(mod, code: str, node: ast.AST, fid: str | None, message: str) -> None:
    line, col, end_line, end_col = mod.span(node)
    for f in mod.summary.findings:
        if f.code == code and f.line == line and f.col == col:
            return
    mod.summary.findings.append(Finding(code, message, line, col, end_line, end_col, None, (), {"scope": fid or ""}))


def _check_compile_in_loop(mod, call: ast.Call, loops: tuple, nested: dict, params: set, fnode, called: dict,
                           fid) -> None:
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
            _driver_report(mod, "MND403", call, fid,
                           f"`torch.compile` inside a loop with {why}: each iteration fails a guard and "
                           "compiles again")
        return
    if fnode is not None and called.get(fnode.name, 0) >= 2 and (new_backend or (captured & params)):
        why = "a new backend callable" if new_backend else "a closure over its parameters"
        _driver_report(mod, "MND403", call, fid,
                       f"`torch.compile` in `{fnode.name}()`, which is called repeatedly, with {why}: each call "
                       "fails a guard and compiles again")


def _dynamic_true(call: ast.Call) -> bool:
    """``torch.compile(..., dynamic=True)``."""
    return any(k.arg == "dynamic" and isinstance(k.value, ast.Constant) and k.value.value is True
               for k in call.keywords)


def _varying_scalars(mod, name: str, sites) -> None:
    seen: dict[object, float] = {}
    for call, loops, _scope, fid in sites:
        numeric_loop = _numeric_loop_names(loops)
        keyed = [(i, a) for i, a in enumerate(call.args)] + [(k.arg, k.value) for k in call.keywords if k.arg]
        for key, arg in keyed:
            v = _number(arg)
            if v is not None:
                if key in seen and seen[key] != v:
                    _driver_report(mod, "MND402", call, fid,
                                   f"`{name}` is called with different Python numbers ({seen[key]!r}, then {v!r}) for "
                                   "the same argument: Dynamo specializes on the value and recompiles")
                seen.setdefault(key, v)
            elif isinstance(arg, ast.Name) and arg.id in numeric_loop:
                _driver_report(mod, "MND402", call, fid,
                               f"`{name}` is called with the loop counter `{arg.id}` (a Python number): Dynamo "
                               "specializes on the value and recompiles")


def _varying_dtypes(mod, name: str, sites) -> None:
    seen: dict[object, str] = {}
    for call, _loops, scope, fid in sites:
        keyed = [(i, a) for i, a in enumerate(call.args)] + [(k.arg, k.value) for k in call.keywords if k.arg]
        for key, arg in keyed:
            dt = _dtype_of(arg, scope)
            if dt is None:
                continue
            if key in seen and seen[key] != dt:
                _driver_report(mod, "MND405", call, fid,
                               f"`{name}` is called with a {dt} tensor after a {seen[key]} one: Dynamo guards on "
                               "dtypes and compiles again")
            seen.setdefault(key, dt)


assert all(RULES[c].kind == "recompile" for c in ("MND401", "MND402", "MND403", "MND404", "MND405"))
