"""The single pass over one file: bindings, classes, functions, compile sites and rule findings.

:func:`analyze_module` walks a parsed module once. Module-level statements give the name bindings;
every function body is walked once by a :class:`FunctionWalker`, which keeps a small tensor-kind
environment (:mod:`mend.analyzers.static.tensors`), skips branches that are dead under compile
(``torch.compiler.is_compiling()`` and its aliases), tracks the enclosing ``try``/loop/``with``
statements and dispatches each node to the rule checkers registered for its kind. Findings are
recorded for *every* function; the project index later keeps those in traced functions only, which
is what lets the result of this pass be cached per file.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from mend.analyzers.static import tensors as tk
from mend.analyzers.static.names import (
    CLASS,
    DEF,
    IMPORT,
    VAR,
    Binding,
    Scope,
    children,
    collect_function_locals,
    import_bindings,
)
from mend.analyzers.static.rules.base import CHECKERS, RULES, Finding
from mend.analyzers.static.source import LineIndex
from mend.analyzers.static.summary import CallSite, ClassInfo, CompileSite, FileSummary, FuncInfo, Ref

COMPILE_NAMES = frozenset({"torch.compile"})
DISABLE_NAMES = frozenset({"torch.compiler.disable", "torch._dynamo.disable", "torch._disable_dynamo"})
CONTEXTMANAGER_NAMES = frozenset({"contextlib.contextmanager", "contextlib.asynccontextmanager"})
TRUE_UNDER_COMPILE = frozenset({
    "torch.compiler.is_compiling", "torch._dynamo.is_compiling", "torch.compiler.is_dynamo_compiling",
    "torch._dynamo.external_utils.is_compiling", "torch._utils.is_compiling",
})
GRAD_MODE_TESTS = frozenset({"torch.is_grad_enabled", "torch.is_inference_mode_enabled"})
FALSE_UNDER_COMPILE = frozenset({"torch.jit.is_scripting", "torch.jit.is_tracing", "torch.onnx.is_in_onnx_export"})
LOCK_NAMES = frozenset(f"threading.{n}" for n in ("Lock", "RLock", "Semaphore", "BoundedSemaphore", "Condition"))


def under_compile(expr: ast.AST, scope: Scope) -> bool | None:
    """The value of ``expr`` under torch.compile when it is fixed (``is_compiling()`` and friends)."""
    if isinstance(expr, ast.Call) and not expr.args:
        q = scope.qualify(expr.func)
        if q in TRUE_UNDER_COMPILE or (q and q.endswith("is_torchdynamo_compiling")):
            return True
        if q in FALSE_UNDER_COMPILE:
            return False
        return None
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        v = under_compile(expr.operand, scope)
        return None if v is None else not v
    if isinstance(expr, ast.BoolOp):
        vals = [under_compile(v, scope) for v in expr.values]
        if isinstance(expr.op, ast.And):
            return False if False in vals else (True if all(v is True for v in vals) else None)
        return True if True in vals else (False if all(v is False for v in vals) else None)
    return None


def _terminates(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise))


class ClassFacts:
    """What the methods of one class assign to ``self``: tensors, submodules, ints, loggers, locks."""

    def __init__(self) -> None:
        self.tensor_attrs: set[str] = set()
        self.module_attrs: set[str] = set()
        self.int_attrs: set[str] = set()
        self.logger_attrs: set[str] = set()
        self.lock_attrs: set[str] = set()
        self.attr_classes: dict[str, set[str]] = {}


class ModuleAnalyzer:
    def __init__(self, tree: ast.Module, source: str, path: str, module: str, is_package: bool) -> None:
        self.tree = tree
        self.source = source
        self.index = LineIndex(source)
        self.module = module
        self.is_package = is_package
        self.scope = Scope(module)
        self.summary = FileSummary(path=path, module=module, is_package=is_package, lines=len(self.index.lines))
        self.facts: dict[str, ClassFacts] = {}
        self.compiled_names: set[str] = set()
        self.patched: dict[str, frozenset[str]] = {}
        self.config_flags: frozenset[str] = frozenset()
        self.func_nodes: list[tuple[FuncInfo, ast.FunctionDef | ast.AsyncFunctionDef, Scope, dict]] = []

    # -- positions -------------------------------------------------------------------------
    def span(self, node: ast.AST) -> tuple[int, int, int, int]:
        line = node.lineno
        end_line = getattr(node, "end_lineno", None) or line
        end_off = getattr(node, "end_col_offset", None)
        col = self.index.col(line, node.col_offset)
        end_col = self.index.col(end_line, end_off) if end_off is not None else col + 1
        return line, col, end_line, end_col

    # -- module level ----------------------------------------------------------------------
    def run(self) -> FileSummary:
        self._bind_module(self.tree.body)
        self.has_compile = "compile" in self.source
        if "_dynamo" in self.source:
            self.config_flags = self._module_config()
        self.compiled_names = self._compiled_names() if self.has_compile else set()
        self._collect(self.tree.body, None, None, self.scope)
        if "reorderable_logging_functions" in self.source:
            self._mark_reorderable()
        for info, node, scope, env in self.func_nodes:
            FunctionWalker(self, info, node, scope, env).walk()
        if self.has_compile:
            DriverPass(self).run()
        self.summary.imports = {k: b.value for k, b in self.scope.names.items() if b.kind == IMPORT}
        return self.summary

    def _mark_reorderable(self) -> None:
        """Module-level ``torch._dynamo.config.reorderable_logging_functions.add(f)`` (also under an
        ``if``): Dynamo runs calls of ``f`` after the graph instead of tracing them."""
        for stmt in self._module_stmts(self.tree.body):
            call = stmt.value if isinstance(stmt, ast.Expr) else None
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "add"
                    and len(call.args) == 1 and isinstance(call.args[0], ast.Name)):
                continue
            if self.scope.qualify(call.func.value) == "torch._dynamo.config.reorderable_logging_functions":
                info = self.summary.functions.get(call.args[0].id)
                if info is not None:
                    info.reorderable = True

    def _compiled_names(self) -> set[str]:
        """Names of functions wrapped by ``torch.compile(name)`` anywhere in this file."""
        out: set[str] = set()
        if "compile" not in self.scope.names and "torch" not in self.scope.names and not any(
                b.value.startswith("torch") for b in self.scope.names.values() if b.kind == IMPORT):
            return out
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Name):
                if self.scope.qualify(node.func) in COMPILE_NAMES:
                    out.add(node.args[0].id)
        return out

    def _module_stmts(self, body: list[ast.stmt]) -> Iterator[ast.stmt]:
        for stmt in body:
            yield stmt
            if isinstance(stmt, ast.If):
                yield from self._module_stmts(stmt.body)
                yield from self._module_stmts(stmt.orelse)
            elif isinstance(stmt, ast.Try):
                yield from self._module_stmts(stmt.body)
                for h in stmt.handlers:
                    yield from self._module_stmts(h.body)
                yield from self._module_stmts(stmt.orelse)
                yield from self._module_stmts(stmt.finalbody)

    def _bind_module(self, body: list[ast.stmt]) -> None:
        names = self.scope.names
        for stmt in self._module_stmts(body):
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                for name, b in import_bindings(stmt, self.module, self.is_package):
                    names[name] = b
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names[stmt.name] = Binding(DEF, stmt.name)
            elif isinstance(stmt, ast.ClassDef):
                names[stmt.name] = Binding(CLASS, stmt.name)
        # assignments last, so that their right-hand sides resolve through the imports above
        for stmt in self._module_stmts(body):
            if isinstance(stmt, (ast.Assign, ast.AnnAssign)) and stmt.value is not None:
                targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                tag = self.value_tag(stmt.value, self.scope)
                for t in targets:
                    for n in _target_names(t):
                        names[n] = Binding(VAR, tag if isinstance(t, ast.Name) else "")

    def value_tag(self, value: ast.AST, scope: Scope) -> str:
        """A tag for what an assigned value is: logger, lock, compiled callable, instance of a class."""
        if isinstance(value, ast.Call):
            q = scope.qualify(value.func)
            if q:
                tail = q.rsplit(".", 1)[-1]
                if tail in ("getLogger", "get_logger", "getChild") and ("logging" in q or tail == "getChild"):
                    return "logger"
                if q in LOCK_NAMES:
                    return "lock"
                if q in COMPILE_NAMES:
                    return "compiled"
                if tail[:1].isupper():
                    return "instance:" + q
        return ""

    def _collect(self, body: list[ast.stmt], cls: str | None, parent: str | None, scope: Scope) -> None:
        """Register functions and classes (recursively), with their decorators and scopes."""
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._function(stmt, cls, parent, scope)
            elif isinstance(stmt, ast.ClassDef) and parent is None:
                cid = f"{cls}.{stmt.name}" if cls else stmt.name
                bases = tuple(q for q in (scope.qualify(b) for b in stmt.bases) if q)
                self.summary.classes[cid] = ClassInfo(id=cid, line=stmt.lineno, bases=bases)
                self.facts[cid] = ClassFacts()
                self._collect(stmt.body, cid, None, scope)
                for base in bases:  # facts of a base class in the same file
                    local = base[len(self.module) + 1:] if base.startswith(self.module + ".") else None
                    if local in self.facts and local != cid:
                        self._merge_facts(cid, local)
            elif isinstance(stmt, (ast.If, ast.Try)) and cls is None and parent is None:
                self._collect(stmt.body, cls, parent, scope)
                self._collect(stmt.orelse, cls, parent, scope)
                if isinstance(stmt, ast.Try):
                    for h in stmt.handlers:
                        self._collect(h.body, cls, parent, scope)

    def _config_patch(self, node, scope: Scope) -> frozenset[str]:
        """Dynamo config flags switched on by ``@torch._dynamo.config.patch(...)`` placed *above*
        ``@torch.compile`` (so they hold while Dynamo traces the function)."""
        flags: set[str] = set()
        seen_compile = False
        for dec in reversed(node.decorator_list):  # innermost first
            target = dec.func if isinstance(dec, ast.Call) else dec
            q = scope.qualify(target)
            if q in COMPILE_NAMES:
                seen_compile = True
            elif q == "torch._dynamo.config.patch" and seen_compile and isinstance(dec, ast.Call):
                for kw in dec.keywords:
                    if kw.arg and isinstance(kw.value, ast.Constant) and kw.value.value is True:
                        flags.add(kw.arg)
                if (len(dec.args) == 2 and isinstance(dec.args[0], ast.Constant)
                        and isinstance(dec.args[1], ast.Constant) and dec.args[1].value is True):
                    flags.add(str(dec.args[0].value))
        return frozenset(flags)

    def _module_config(self) -> frozenset[str]:
        """``torch._dynamo.config.<flag> = True`` statements at module level (file-wide)."""
        flags = set()
        for stmt in self._module_stmts(self.tree.body):
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and stmt.value.value is True:
                for t in stmt.targets:
                    if isinstance(t, ast.Attribute) and self.scope.qualify(t.value) == "torch._dynamo.config":
                        flags.add(t.attr)
        return frozenset(flags)

    def _merge_facts(self, cid: str, base: str) -> None:
        f, b = self.facts[cid], self.facts[base]
        for attr in ("tensor_attrs", "module_attrs", "int_attrs", "logger_attrs", "lock_attrs"):
            getattr(f, attr).update(getattr(b, attr))
        for k, v in b.attr_classes.items():
            f.attr_classes.setdefault(k, set()).update(v)
        self.summary.classes[cid].attr_classes = {k: tuple(sorted(v)) for k, v in f.attr_classes.items()}

    def _function(self, node: ast.FunctionDef | ast.AsyncFunctionDef, cls: str | None, parent: str | None,
                  scope: Scope) -> None:
        if parent:
            fid = f"{parent}.<locals>.{node.name}"
        else:
            fid = f"{cls}.{node.name}" if cls else node.name
        info = FuncInfo(id=fid, name=node.name, line=node.lineno, end_line=node.end_lineno or node.lineno,
                        cls=cls if not parent else None, parent=parent)
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            q = scope.qualify(target)
            if q in COMPILE_NAMES:
                info.compiled, info.compile_line = True, dec.lineno
                line, col, _, _ = self.span(dec)
                self.summary.compile_sites.append(
                    CompileSite(line, col, "decorator", ("qual", f"{self.module}.{fid}"), parent))
            elif q in DISABLE_NAMES:
                info.disabled = True
            elif q in CONTEXTMANAGER_NAMES:
                info.contextmanager = True
        info_flags = self._config_patch(node, scope)
        if info_flags:
            self.patched[fid] = info_flags
        self.summary.functions[fid] = info
        if cls and not parent:
            self.summary.classes[cls].methods[node.name] = fid
        fscope = Scope(self.module, scope)
        self_nodes: list | None = [] if (cls and not parent) else None
        collect_function_locals(node, fscope, self.module, self.is_package, fid, self_nodes)
        if self_nodes:
            self._class_facts(node, cls, fscope, self_nodes)
        self.func_nodes.append((info, node, fscope, {}))
        self._collect(node.body, None, fid, fscope)

    def _class_facts(self, node: ast.FunctionDef | ast.AsyncFunctionDef, cls: str, scope: Scope,
                     nodes: list) -> None:
        """Record ``self.x = ...`` and ``self.register_buffer(...)`` facts from one method."""
        if not node.args.args:
            return
        me = node.args.args[0].arg
        facts = self.facts[cls]
        for sub in nodes:
            if isinstance(sub, ast.Assign) and len(sub.targets) == 1:
                t = sub.targets[0]
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me:
                    self._attr_fact(facts, t.attr, sub.value, scope)
            elif isinstance(sub, ast.AnnAssign) and sub.value is not None:
                t = sub.target
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == me:
                    self._attr_fact(facts, t.attr, sub.value, scope)
            elif isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
                f = sub.func
                if (f.attr in ("register_buffer", "register_parameter") and isinstance(f.value, ast.Name)
                        and f.value.id == me and sub.args and isinstance(sub.args[0], ast.Constant)
                        and isinstance(sub.args[0].value, str)):
                    facts.tensor_attrs.add(sub.args[0].value)
                elif (f.attr == "add_module" and isinstance(f.value, ast.Name) and f.value.id == me and sub.args
                      and isinstance(sub.args[0], ast.Constant) and isinstance(sub.args[0].value, str)):
                    facts.module_attrs.add(sub.args[0].value)
        self.summary.classes[cls].attr_classes = {k: tuple(sorted(v)) for k, v in facts.attr_classes.items()}

    def _attr_fact(self, facts: ClassFacts, attr: str, value: ast.AST, scope: Scope) -> None:
        if isinstance(value, ast.Constant) and type(value.value) is int:
            facts.int_attrs.add(attr)
            return
        if not isinstance(value, ast.Call):
            return
        q = scope.qualify(value.func) or ""
        tag = self.value_tag(value, scope)
        if tag == "logger":
            facts.logger_attrs.add(attr)
        elif tag == "lock":
            facts.lock_attrs.add(attr)
        elif q in ("torch.nn.Parameter", "torch.nn.parameter.Parameter") or (
                q.startswith("torch.") and tk.torch_call_kind(q) == tk.T):
            facts.tensor_attrs.add(attr)
        elif q.startswith("torch.nn.") and q.rsplit(".", 1)[-1][:1].isupper():
            facts.module_attrs.add(attr)
            classes = {c for c in self._instantiated(value, scope) if not c.startswith("torch.")}
            if classes:
                facts.attr_classes.setdefault(attr, set()).update(classes)
        elif tag.startswith("instance:") and not q.startswith(("torch.", "builtins.")):
            facts.module_attrs.add(attr)
            facts.attr_classes.setdefault(attr, set()).add(q)

    def _instantiated(self, value: ast.AST, scope: Scope) -> set[str]:
        out = set()
        for sub in ast.walk(value):
            if isinstance(sub, ast.Call):
                q = scope.qualify(sub.func)
                if q and q.rsplit(".", 1)[-1][:1].isupper():
                    out.add(q)
        return out

    # -- references ------------------------------------------------------------------------
    def ref_of(self, expr: ast.AST, scope: Scope, cls: str | None, self_name: str | None,
               local_values: dict[str, ast.AST] | None = None, depth: int = 0) -> Ref | None:
        """A symbolic reference to what ``expr`` denotes (a function, a class instance, ...)."""
        if depth > 4:
            return None
        if isinstance(expr, ast.Call):
            q = scope.qualify(expr.func)
            if q and q.rsplit(".", 1)[-1][:1].isupper() and not q.startswith(("builtins.", "torch.")):
                return ("instance", q)
            return None
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == self_name:
            return ("self", expr.attr) if cls else None
        if isinstance(expr, ast.Name):
            b = scope.lookup(expr.id)
            if b is not None and b.kind == VAR:
                if local_values and expr.id in local_values:
                    v = local_values[expr.id]
                    if isinstance(v, tuple):  # (call, index) from tuple unpacking
                        call, idx = v
                        q = scope.qualify(call.func)
                        return ("ret", q, str(idx)) if q else None
                    return self.ref_of(v, scope, cls, self_name, None, depth + 1)
                if b.value.startswith("instance:"):
                    return ("instance", b.value[len("instance:"):])
                return None
        q = scope.qualify(expr)
        if q and not q.startswith("builtins."):
            return ("qual", q)
        return None


def _target_names(t: ast.AST) -> Iterator[str]:
    if isinstance(t, ast.Name):
        yield t.id
    elif isinstance(t, (ast.Tuple, ast.List)):
        for e in t.elts:
            yield from _target_names(e)
    elif isinstance(t, ast.Starred):
        yield from _target_names(t.value)


class FunctionWalker:
    """Walks one function body once: tensor kinds, dead branches, regions, rule dispatch."""

    def __init__(self, mod: ModuleAnalyzer, info: FuncInfo, node: ast.FunctionDef | ast.AsyncFunctionDef,
                 scope: Scope, env: dict) -> None:
        self.mod = mod
        self.info = info
        self.node = node
        self.scope = scope
        self.env: dict[str, int] = dict(env)
        self.bool_names: set[str] = set()
        self.ptr_names: set[str] = set()
        self.local_values: dict[str, object] = {}
        self.cls = info.cls
        self.facts = mod.facts.get(self.cls) if self.cls else None
        self.self_name = node.args.args[0].arg if (self.cls and node.args.args) else None
        self.is_forward = bool(self.cls) and info.name == "forward"
        self.compiled_root = info.compiled or (info.parent is None and not info.cls
                                               and info.name in mod.compiled_names)
        self.loop_vars: dict[str, str] = {}  # loop variable -> self attribute it iterates
        self.method_loop_vars: dict[str, str] = {}  # the same, through enumerate(): for method calls only
        self.regions: list[tuple[str, ast.AST, int, int, tuple]] = []  # (kind, node, start, end, requires)
        self.findings: list[Finding] = []
        self._seen: set[tuple[str, int, int]] = set()
        self.config_flags = mod.config_flags | mod.patched.get(info.id, frozenset())
        self.loop_depth = 0
        self.mode_guards: list[str] = []  # enclosing `if self.training:`-style conditions
        self._with_items: set[int] = set()
        self._params()

    # -- context API used by the rule checkers -------------------------------------------------
    def qualify(self, expr: ast.AST) -> str | None:
        return self.scope.qualify(expr)

    def report(self, code: str, node: ast.AST, message: str | None = None,
               requires: tuple[tuple[str, str], ...] = (), **data: object) -> None:
        if self.config_flags and code in self._config_silenced(node):
            return
        line, col, end_line, end_col = self.mod.span(node)
        key = (code, line, col)
        if key in self._seen:
            return
        self._seen.add(key)
        data = dict(data)
        message = message or RULES[code].summary
        if self.mode_guards and "mode" not in data:
            data["mode"] = self.mode_guards[-1]
            message += f" (only when `{self.mode_guards[-1]}`)"
        self.findings.append(Finding(code, message, line, col, end_line, end_col, self.info.id, requires, data))

    def mode_test(self, expr: ast.AST) -> str | None:
        """The text of ``expr`` when it tests a *mode* the analyzer cannot see: ``self.training``
        (train vs eval) or a dtype (``x.dtype == torch.float16``, ``x.is_floating_point()``)."""
        e = expr.operand if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not) else expr
        if isinstance(e, ast.Attribute) and e.attr == "training" and self.is_self_attr(e):
            return ast.unparse(expr)
        if isinstance(e, ast.Compare):
            for o in (e.left, *e.comparators):
                if isinstance(o, ast.Attribute) and o.attr == "dtype":
                    return ast.unparse(expr)
        if (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute)
                and e.func.attr in ("is_floating_point", "is_complex")):
            return ast.unparse(expr)
        if isinstance(e, ast.Call) and not e.args and self.scope.qualify(e.func) in GRAD_MODE_TESTS:
            return ast.unparse(expr)
        return None

    def mode_guard(self, test: ast.AST) -> str | None:
        """The mode test that an ``if`` body runs under: ``if self.training:``, ``if self.training and
        self.layerdrop > 0:``, ``if h.dtype == torch.float16 and <tensor test>:``."""
        m = self.mode_test(test)
        if m is None and isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            for v in test.values:
                m = self.mode_test(v)
                if m is not None:
                    break
        if m is None and isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
            # `not is_compiling() or torch.is_grad_enabled()`: under compile only the other operands decide
            live = [v for v in test.values if under_compile(v, self.scope) is not False]
            if len(live) == 1:
                m = self.mode_test(live[0])
        return m

    def mode_prefixed(self, test: ast.AST) -> str | None:
        """For ``a and b and <tensor condition>``: the first mode test among the operands before the
        first tensor-valued one. The tensor condition is evaluated (and breaks) only in that mode."""
        if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And)):
            return None
        for v in test.values:
            if self.kind(v) == tk.T:
                return None
            m = self.mode_test(v)
            if m is not None:
                return m
        return None

    def _config_silenced(self, node: ast.AST) -> set[str]:
        """Rules that do not break under the Dynamo config flags in effect (verified in the fixtures)."""
        out: set[str] = set()
        if "capture_scalar_outputs" in self.config_flags:
            out.add("MND301")
            if not (isinstance(node, ast.Call) and self.qualify(node.func) == "builtins.bool"):
                out.add("MND302")
        if "capture_dynamic_output_shape_ops" in self.config_flags:
            out |= {"MND304", "MND305"}
        if "trace_autograd_ops" in self.config_flags:
            out.add("MND501")
        return out

    def is_self_attr(self, expr: ast.AST) -> str | None:
        if isinstance(expr, ast.Attribute) and isinstance(expr.value, ast.Name) and expr.value.id == self.self_name:
            return expr.attr
        return None

    def is_logger(self, expr: ast.AST) -> bool:
        if isinstance(expr, ast.Name):
            b = self.scope.lookup(expr.id)
            return b is not None and b.kind == VAR and b.value == "logger"
        attr = self.is_self_attr(expr)
        if attr and self.facts and attr in self.facts.logger_attrs:
            return True
        if isinstance(expr, ast.Call):
            return self.mod.value_tag(expr, self.scope) == "logger"
        return False

    def is_lock(self, expr: ast.AST) -> bool:
        if isinstance(expr, ast.Call):
            return self.qualify(expr.func) in LOCK_NAMES
        if isinstance(expr, ast.Name):
            b = self.scope.lookup(expr.id)
            return b is not None and b.kind == VAR and b.value == "lock"
        attr = self.is_self_attr(expr)
        return bool(attr and self.facts and attr in self.facts.lock_attrs)

    def is_bool_tensor(self, expr: ast.AST) -> bool:
        """``expr`` is a boolean tensor (a mask): comparisons of tensors, ``isnan``, ``.bool()``, ..."""
        if isinstance(expr, ast.Compare):
            return self.kind(expr) == tk.T
        if isinstance(expr, ast.Name):
            return expr.id in self.bool_names
        if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Invert):
            return self.is_bool_tensor(expr.operand)
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.BitAnd, ast.BitOr, ast.BitXor)):
            return self.is_bool_tensor(expr.left) or self.is_bool_tensor(expr.right)
        if isinstance(expr, ast.Call):
            q = self.qualify(expr.func)
            if q in tk.BOOL_TENSOR_TORCH:
                return True
            f = expr.func
            if isinstance(f, ast.Attribute) and f.attr in tk.BOOL_METHODS and self.kind(f.value) in (tk.T, tk.M):
                return True
            if isinstance(f, ast.Attribute) and f.attr == "to" and expr.args:
                return self.qualify(expr.args[0]) == "torch.bool"
        return False

    # -- tensor kinds ------------------------------------------------------------------------
    def _params(self) -> None:
        a = self.node.args
        positional = [*a.posonlyargs, *a.args]
        defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
        pairs = list(zip(positional, defaults)) + list(zip(a.kwonlyargs, a.kw_defaults))
        for i, (arg, default) in enumerate(pairs):
            if i == 0 and self.self_name is not None and arg.arg == self.self_name:
                continue
            kind = tk.is_tensor_annotation(arg.annotation, self.qualify)
            if kind == tk.T and isinstance(default, ast.Constant) and default.value is None:
                kind = tk.M
            if kind == tk.N and arg.annotation is None:
                if self.is_forward and default is None and arg.arg in self._tensor_like_names():
                    # forward's parameters are tensors in practice; flags such as
                    # `output_attentions` (never used with `.attr` or `[...]`) are not
                    kind = tk.T
                elif default is None or (isinstance(default, ast.Constant) and default.value is None):
                    # unannotated parameters may be tensors: enough for `.item()`-style method rules,
                    # never for truthiness rules
                    kind = tk.M
            if kind:
                self.env[arg.arg] = kind
                if "mask" in arg.arg.lower() and kind == tk.T:
                    self.bool_names.add(arg.arg)

    def _tensor_like_names(self) -> set[str]:
        """Names used as ``name.attr`` or ``name[...]`` somewhere in this function (computed once)."""
        cached = getattr(self, "_tln", None)
        if cached is not None:
            return cached
        found: set[str] = set()
        self._tln = found
        stack: list[ast.AST] = list(self.node.body)
        while stack:
            n = stack.pop()
            t = n.__class__
            if t is ast.Attribute or t is ast.Subscript:
                v = n.value
                if v.__class__ is ast.Name:
                    found.add(v.id)
            elif t is ast.FunctionDef or t is ast.AsyncFunctionDef or t is ast.ClassDef or t is ast.Lambda:
                continue
            stack.extend(children(n))
        return found

    def kind(self, e: ast.AST) -> int:
        if isinstance(e, ast.Name):
            return self.env.get(e.id, tk.N)
        if isinstance(e, ast.Constant):
            return tk.N
        if isinstance(e, ast.Attribute):
            attr = self.is_self_attr(e)
            if attr is not None:
                return tk.T if (self.facts and attr in self.facts.tensor_attrs) else tk.N
            base = self.kind(e.value)
            if base in (tk.T, tk.M):
                if e.attr in tk.TENSOR_ATTRS:
                    return base
                return tk.N
            return tk.N
        if isinstance(e, ast.Call):
            return self.call_kind(e)
        if isinstance(e, ast.Subscript):
            base = self.kind(e.value)
            if base in (tk.T, tk.M):
                return base
            return tk.N
        if isinstance(e, ast.BinOp):
            kinds = (self.kind(e.left), self.kind(e.right))
            if tk.T in kinds:
                return tk.T
            if tk.M in kinds:
                return tk.M
            if tk.S in kinds:
                return tk.S
            return tk.N
        if isinstance(e, ast.Compare):
            if any(isinstance(op, (ast.Is, ast.IsNot, ast.In, ast.NotIn)) for op in e.ops):
                return tk.N
            operands = [e.left, *e.comparators]
            kinds = [self.kind(o) for o in operands]
            if tk.T in kinds:
                return tk.T
            if tk.M in kinds and all(k == tk.M or _is_number(o) for o, k in zip(operands, kinds)):
                # `mask > 0` on a maybe-tensor is a maybe-tensor (a mask): enough for `.item()`-style
                # method rules on it, never for truthiness rules
                return tk.M
            return tk.N
        if isinstance(e, ast.BoolOp):
            kinds = [self.kind(v) for v in e.values]
            return tk.T if tk.T in kinds else tk.N
        if isinstance(e, ast.UnaryOp):
            k = self.kind(e.operand)
            return k if k in (tk.T, tk.S) else tk.N
        if isinstance(e, ast.IfExp):
            kinds = (self.kind(e.body), self.kind(e.orelse))
            return tk.T if kinds == (tk.T, tk.T) else tk.N
        if isinstance(e, ast.NamedExpr):
            return self.kind(e.value)
        return tk.N

    def call_kind(self, e: ast.Call) -> int:
        f = e.func
        q = self.qualify(f)
        if q is not None:
            if q.startswith("torch."):
                return tk.torch_call_kind(q)
            if q in ("builtins.float", "builtins.int", "builtins.bool"):
                return tk.S if (e.args and self.kind(e.args[0]) in (tk.T, tk.S)) else tk.N
            if q in ("builtins.abs", "builtins.max", "builtins.min", "builtins.sum"):
                kinds = [self.kind(a) for a in e.args]
                return tk.T if tk.T in kinds else (tk.S if tk.S in kinds else tk.N)
            if q.startswith("math."):
                return tk.S if any(self.kind(a) in (tk.T, tk.S) for a in e.args) else tk.N
            if (q.split(".", 1)[0] not in NOT_TENSOR_LIBS
                    and any(self.kind(a) in (tk.T, tk.M) for a in (*e.args, *(k.value for k in e.keywords)))):
                # a helper of the project or a library applied to a tensor: maybe a tensor (enough for
                # `.item()`-style method rules on its result, never for truthiness rules)
                return tk.M
            return tk.N
        if isinstance(f, ast.Attribute):
            attr = self.is_self_attr(f)
            if attr is not None:
                if self.facts and attr in self.facts.module_attrs:
                    return tk.T
                if any(self.kind(a) in (tk.T, tk.M) for a in (*e.args, *(k.value for k in e.keywords))):
                    return tk.M  # `mask = self._merge_masks(mask, other)`: maybe a tensor
                return tk.N
            base = self.kind(f.value)
            if base in (tk.T, tk.M):
                if f.attr in tk.DATA_SCALAR_METHODS:
                    return tk.S
                if f.attr in tk.NON_TENSOR_METHODS:
                    return tk.N
                return base
            return tk.N
        if isinstance(f, ast.Name) and f.id in self.loop_vars:
            return tk.T  # a layer of a ModuleList iterated in forward
        if isinstance(f, ast.Subscript):
            attr = self.is_self_attr(f.value)
            if attr and self.facts and attr in self.facts.module_attrs:
                return tk.T
        return tk.N

    def _assign(self, target: ast.AST, value: ast.AST | None, kind: int) -> None:
        if isinstance(target, ast.Name):
            self.env[target.id] = kind
            if value is not None and self.is_bool_tensor(value):
                self.bool_names.add(target.id)
            else:
                self.bool_names.discard(target.id)
            if value is not None and _is_ptr_value(value, self):
                self.ptr_names.add(target.id)
            else:
                self.ptr_names.discard(target.id)
            if value is not None:
                self.local_values[target.id] = value
        elif isinstance(target, (ast.Tuple, ast.List)):
            if isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts):
                for t, v in zip(target.elts, value.elts):
                    self._assign(t, v, self.kind(v))
            else:
                passed = set()
                if isinstance(value, ast.Call):
                    passed = {a.id for a in (*value.args, *(k.value for k in value.keywords))
                              if isinstance(a, ast.Name) and self.env.get(a.id) in (tk.T, tk.M)}
                for i, t in enumerate(target.elts):
                    k = kind if kind == tk.T else tk.N
                    if k == tk.N and isinstance(t, ast.Name) and t.id in passed:
                        k = tk.M  # `mask, x = pad(mask=mask, x=x)`: a tensor passed through a helper
                    self._assign(t, None, k)
                    if isinstance(t, ast.Name) and isinstance(value, ast.Call):
                        self.local_values[t.id] = (value, i)

    # -- the walk ------------------------------------------------------------------------------
    def walk(self) -> None:
        self.block(self.node.body)
        self._frame_skip_findings()
        self._constructor_finding()
        self.mod.summary.findings.extend(self.findings)

    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            if self.stmt(stmt):
                break  # the rest of the block is dead under compile

    def stmt(self, s: ast.stmt) -> bool:
        """Walk one statement. Returns True when the code after it is dead under compile."""
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)):
            nested = self.mod.summary.functions.get(f"{self.info.id}.<locals>.{s.name}")
            for d in s.decorator_list:
                self.expr(d)
            if nested is not None:
                for i, entry in enumerate(self.mod.func_nodes):
                    if entry[0] is nested:
                        self.mod.func_nodes[i] = (entry[0], entry[1], entry[2], dict(self.env))
            return False
        if isinstance(s, ast.ClassDef):
            return False
        if isinstance(s, ast.If):
            fixed = under_compile(s.test, self.scope)
            if fixed is True:
                self.block(s.body)
                return _terminates(s.body)
            if fixed is False:
                self.block(s.orelse)
                return _terminates(s.orelse)
            self.dispatch("if", s)
            self.expr(s.test)
            mode = self.mode_guard(s.test)
            if mode is not None:
                self.mode_guards.append(mode)
            self.block(s.body)
            if mode is not None:
                self.mode_guards.pop()
            self.block(s.orelse)
            return False
        if isinstance(s, ast.While):
            self.dispatch("while", s)
            self.expr(s.test)
            self._loop(s, s.body)
            self.block(s.orelse)
            return False
        if isinstance(s, (ast.For, ast.AsyncFor)):
            self.expr(s.iter)
            ik = self.kind(s.iter)
            attr = self.is_self_attr(s.iter)
            for n in _target_names(s.target):
                self.env[n] = tk.T if ik == tk.T else tk.N
                if attr and self.facts and attr in self.facts.module_attrs:
                    self.loop_vars[n] = attr
            it = s.iter
            if (isinstance(it, ast.Call) and len(it.args) == 1 and self.qualify(it.func) == "builtins.enumerate"
                    and isinstance(s.target, ast.Tuple) and len(s.target.elts) == 2
                    and isinstance(s.target.elts[1], ast.Name)):
                attr = self.is_self_attr(it.args[0])
                if attr and self.facts and attr in self.facts.module_attrs:
                    # `for i, layer in enumerate(self.layers): layer.reset()`; only for method calls: a
                    # break reached through `layer(x)` depends on the layer's inputs, which the
                    # transitive frame-skip check cannot see
                    self.method_loop_vars[s.target.elts[1].id] = attr
            self._loop(s, s.body)
            self.block(s.orelse)
            return False
        if isinstance(s, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            start = len(self.findings)
            self.block(s.body)
            self.regions.append(("try", s, start, len(self.findings), ()))
            for h in s.handlers:
                self.block(h.body)
            self.block(s.orelse)
            self.block(s.finalbody)
            return False
        if isinstance(s, (ast.With, ast.AsyncWith)):
            self.dispatch("with", s)
            for item in s.items:
                self._with_items.add(id(item.context_expr))
                self.expr(item.context_expr)
                if item.optional_vars is not None:
                    for n in _target_names(item.optional_vars):
                        self.env[n] = tk.N
            start = len(self.findings)
            self.block(s.body)
            for item in s.items:
                ctx = item.context_expr
                if isinstance(ctx, ast.Call):
                    ref = self.mod.ref_of(ctx.func, self.scope, self.cls, self.self_name)
                    if ref is not None:
                        self.regions.append(("ctx", s, start, len(self.findings), (("contextmanager", "|".join(ref)),)))
            return False
        if isinstance(s, ast.Assign):
            self.expr(s.value)
            for t in s.targets:
                self.expr_targets(t)
            self.dispatch("assign", s)
            k = self.kind(s.value)
            for t in s.targets:
                self._assign(t, s.value, k)
            return False
        if isinstance(s, ast.AnnAssign):
            if s.value is not None:
                self.expr(s.value)
                self._assign(s.target, s.value, self.kind(s.value))
            return False
        if isinstance(s, ast.AugAssign):
            self.expr(s.value)
            self.expr_targets(s.target)
            self.dispatch("augassign", s)
            if isinstance(s.target, ast.Name):
                k = max(self.kind(s.target), self.kind(s.value)) if tk.S not in (
                    self.kind(s.target), self.kind(s.value)) else tk.S
                self.env[s.target.id] = k
            return False
        if isinstance(s, ast.Match):
            self.expr(s.subject)
            for case in s.cases:
                self.block(case.body)
            return False
        if isinstance(s, (ast.Return, ast.Raise)):
            for child in ast.iter_child_nodes(s):
                self.expr(child)
            if isinstance(s, ast.Return) and s.value is not None:
                elts = s.value.elts if isinstance(s.value, ast.Tuple) else [s.value]
                self.info.returns.append(tuple(
                    self.mod.ref_of(e, self.scope, self.cls, self.self_name, self.local_values) for e in elts[:8]))
            return False
        for child in ast.iter_child_nodes(s):
            if isinstance(child, ast.expr):
                self.expr(child)
        return False

    def _loop(self, s: ast.AST, body: list[ast.stmt]) -> None:
        start = len(self.findings)
        self.loop_depth += 1
        self.block(body)
        self.loop_depth -= 1
        self.regions.append(("loop", s, start, len(self.findings), ()))

    def expr_targets(self, t: ast.AST) -> None:
        """Expressions inside assignment targets (``x[i] = ...``: the ``i``)."""
        for sub in ast.walk(t):
            if isinstance(sub, ast.Subscript):
                self.expr(sub.slice)

    def expr(self, e: ast.AST) -> None:
        stack = [e]
        while stack:
            n = stack.pop()
            if isinstance(n, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(n, ast.IfExp):
                fixed = under_compile(n.test, self.scope)
                if fixed is not None:
                    stack.append(n.body if fixed else n.orelse)
                    continue
            t = type(n)
            if t is ast.Call:
                self.dispatch("call", n)
                self._record_call(n)
            elif t is ast.IfExp:
                self.dispatch("ifexp", n)
            elif t is ast.Subscript and isinstance(n.ctx, ast.Load):
                self.dispatch("subscript", n)
            elif t is ast.JoinedStr:
                self.dispatch("fstring", n)
            elif t is ast.BinOp:
                self.dispatch("binop", n)
            elif t is ast.NamedExpr:
                self._assign(n.target, n.value, self.kind(n.value))
            elif t is ast.Name or t is ast.Constant:
                continue
            stack.extend(children(n))

    def dispatch(self, kind: str, node: ast.AST) -> None:
        for fn in CHECKERS.get(kind, ()):
            fn(self, node)

    def call_ref(self, call: ast.Call) -> Ref | None:
        """A symbolic reference to the callee of ``call`` when it may be defined in the checked tree."""
        f = call.func
        ref: Ref | None = None
        if isinstance(f, ast.Name):
            b = self.scope.lookup(f.id)
            if b is not None and b.kind in (DEF, CLASS, IMPORT):
                q = self.scope.qualify(f) or ""
                if not q.startswith("torch."):
                    ref = ("qual", q)
            elif f.id in self.loop_vars:
                ref = ("selfattr", self.loop_vars[f.id])
        elif isinstance(f, ast.Attribute):
            attr = self.is_self_attr(f)
            sub = self.is_self_attr(f.value)
            if attr is not None:
                ref = ("selfattr", attr) if (self.facts and attr in self.facts.module_attrs) else ("self", attr)
            elif sub is not None and self.facts and sub in self.facts.module_attrs:
                ref = ("selfattrm", sub, f.attr)  # a method of a submodule: `self.encoder.reset()`
            elif isinstance(f.value, ast.Name) and f.value.id in self.loop_vars:
                ref = ("selfattrm", self.loop_vars[f.value.id], f.attr)  # `for layer in self.layers: layer.reset()`
            elif isinstance(f.value, ast.Name) and f.value.id in self.method_loop_vars:
                ref = ("selfattrm", self.method_loop_vars[f.value.id], f.attr)
            elif (isinstance(f.value, ast.Call) and isinstance(f.value.func, ast.Name)
                  and f.value.func.id == "super"):
                ref = ("super", f.attr)
            else:
                q = self.qualify(f)
                if q and not q.startswith(("builtins.", "torch.")):
                    ref = ("qual", q)
        elif isinstance(f, ast.Subscript):
            attr = self.is_self_attr(f.value)
            if attr and self.facts and attr in self.facts.module_attrs:
                ref = ("selfattr", attr)
        if ref is not None and ref[-1]:
            return ref
        return None

    def _record_call(self, call: ast.Call) -> None:
        ref = self.call_ref(call)
        if ref is not None:
            line, col, end_line, end_col = self.mod.span(call)
            self.info.calls.append(CallSite(ref, line, col, end_line, end_col, self.loop_depth > 0))

    def _constructor_finding(self) -> None:
        """A module ``__init__`` that breaks (kept only when it is traced: constructed in compiled code)
        breaks again at ``super().__init__()`` when Dynamo compiles the constructor frame on its own."""
        if not (self.cls and self.info.name == "__init__"):
            return
        breaks = [f for f in self.findings if RULES[f.code].kind == "break" and "mode" not in f.data]
        if not breaks:
            return
        first = min(f.line for f in breaks)
        for stmt in self.node.body:
            if stmt.lineno >= first:
                return
            v = stmt.value if isinstance(stmt, ast.Expr) else None
            if (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "__init__"
                    and isinstance(v.func.value, ast.Call) and isinstance(v.func.value.func, ast.Name)
                    and v.func.value.func.id == "super"):
                self.report("MND511", v, inner_line=first)
                return

    def _frame_skip_findings(self) -> None:
        """A break inside ``try``, a loop, or a user ``@contextmanager`` makes Dynamo skip the frame."""
        for kind, node, start, end, requires in self.regions:
            body = node.body
            line, col, _, _ = self.mod.span(node)
            self.info.regions.append((kind, line, col, body[0].lineno, body[-1].end_lineno or body[-1].lineno,
                                      tuple(requires)))
            # a break that happens only in one mode (`if self.training:`) does not make the statement
            # skip the frame in the other modes, and the statement runs in all of them: not reported
            inner = [f for f in self.findings[start:end] if RULES[f.code].kind == "break"]
            code = {"try": "MND505", "loop": "MND506", "ctx": "MND508"}[kind]
            what = {"try": "inside `try`", "loop": "inside a loop", "ctx": "inside a user @contextmanager"}[kind]
            for f in inner:
                if "mode" in f.data and "frame_skip" not in f.data:
                    # said on the mode-only line itself, which runs only in that mode
                    f.data["frame_skip"] = code
                    f.message += (f"; {what} (line {line}) it makes Dynamo skip the whole frame "
                                  f"({', '.join(RULES[code].registry_ids)})")
            inner = [f for f in inner if "mode" not in f.data]
            if kind == "loop":
                inner = [f for f in inner if not (f.code == "MND202" and f.line == node.lineno)]
            if not inner:
                continue
            first = min(inner, key=lambda f: (len(f.requires), f.line, f.col))
            msg = (f"{RULES[first.code].name} ({first.code}) at line {first.line} breaks the graph {what}: "
                   f"Dynamo cannot resume here and skips the whole frame ({', '.join(RULES[code].registry_ids)})")
            header = node
            self.report(code, _header_node(header), msg, requires=tuple(requires) + tuple(first.requires),
                        inner_line=first.line, inner_code=first.code)


def _header_node(node: ast.AST) -> ast.AST:
    """A node spanning only the first line of a compound statement (for the report position)."""
    class _H:
        pass
    h = _H()
    h.lineno = node.lineno
    h.col_offset = node.col_offset
    h.end_lineno = node.lineno
    h.end_col_offset = None
    return h  # type: ignore[return-value]


NOT_TENSOR_LIBS = frozenset(
    "builtins numpy np math cmath random os sys time datetime logging warnings json re collections itertools "
    "functools typing copy inspect operator dataclasses enum abc contextlib threading pickle struct hashlib "
    "zlib string textwrap pathlib io".split())


def _is_number(e: ast.AST) -> bool:
    if isinstance(e, ast.UnaryOp) and isinstance(e.op, (ast.USub, ast.UAdd)):
        e = e.operand
    return isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) and not isinstance(e.value, bool)


def _is_ptr_value(value: ast.AST, w: FunctionWalker) -> bool:
    if isinstance(value, ast.Call):
        f = value.func
        if isinstance(f, ast.Attribute) and f.attr == "data_ptr":
            return True
        if w.qualify(f) == "builtins.id":
            return True
    return False


class DriverPass:
    """Recompile triggers at the places that *call* compiled code (any scope, traced or not)."""

    def __init__(self, mod: ModuleAnalyzer) -> None:
        self.mod = mod

    def run(self) -> None:
        from mend.analyzers.static.rules import recompiles

        recompiles.check_drivers(self.mod)
