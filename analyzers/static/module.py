"""The pass over one file: bindings, classes, functions, compile sites, then the rule hooks.

:class:`ModuleAnalyzer` reads a parsed module once. Module-level statements give the name bindings;
classes give what their methods assign to ``self`` (:class:`ClassFacts`); every function body is
walked once by a :class:`~mend.analyzers.static.walker.FunctionWalker` (tensor kinds, dead branches,
regions, node and function checkers); compile sites are recorded (decorators while collecting, calls
in the driver scopes); the file checkers run last. Findings are recorded for *every* function; the
project index later keeps those in traced functions only, which is what lets the result of this pass
be cached per file. The analyzer is the :class:`~mend.analyzers.static.rules.context.FileContext` of
the file checkers.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from mend import deadline
from mend.analyzers.static.names import (
    CLASS,
    DEF,
    IMPORT,
    VAR,
    Binding,
    Scope,
    collect_function_locals,
    import_bindings,
    target_names,
    walk_nodes,
)
from mend.analyzers.static.rules.base import FILE_CHECKERS, Finding
from mend.analyzers.static.rules.context import ClassFacts, DriverScope, FunctionNode, Span
from mend.analyzers.static.source import LineIndex
from mend.analyzers.static.summary import CallSite, ClassInfo, CompileSite, FileSummary, FuncInfo, Ref
from mend.analyzers.static.tensors import T, torch_call_kind
from mend.analyzers.static.torch_facts import COMPILE_NAMES, DISABLE_NAMES, EMIT_HELPER, PARAMETER_NAMES, RNN_MODULES
from mend.analyzers.static.walker import FunctionWalker

CONTEXTMANAGER_NAMES = frozenset({"contextlib.contextmanager", "contextlib.asynccontextmanager"})
LOCK_NAMES = frozenset(f"threading.{n}" for n in ("Lock", "RLock", "Semaphore", "BoundedSemaphore", "Condition"))
FACT_SETS = ("tensor_attrs", "module_attrs", "int_attrs", "logger_attrs", "lock_attrs", "rnn_attrs")


class ModuleAnalyzer:
    def __init__(self, tree: ast.Module, source: str, path: str, module: str, is_package: bool) -> None:
        self.tree = tree
        self.source = source
        self.index = LineIndex(source)
        self.module = module
        self.is_package = is_package
        self.scope = Scope(module)
        self.summary = FileSummary(path=path, module=module, is_package=is_package, lines=len(self.index.lines))
        self.class_facts: dict[str, ClassFacts] = {}
        self.patched: dict[str, frozenset[str]] = {}
        self.config_flags: frozenset[str] = frozenset()
        self.func_nodes: list[tuple[FuncInfo, FunctionNode, Scope, dict]] = []
        self.tensor_params: dict[str, set[str]] = {}  # function id -> parameters the file passes tensors to
        self.static_params: dict[str, set[str]] = {}  # function id -> parameters the file passes Python values to
        self.static_methods: set[str] = set()  # ids of the methods decorated ``@staticmethod`` (no ``self``)
        self.has_compile = "compile" in source
        self._driver_scopes: list[DriverScope] | None = None

    # -- positions -------------------------------------------------------------------------
    def span(self, node: ast.AST) -> Span:
        line = node.lineno
        end_line = getattr(node, "end_lineno", None) or line
        end_off = getattr(node, "end_col_offset", None)
        col = self.index.col(line, node.col_offset)
        end_col = self.index.col(end_line, end_off) if end_off is not None else col + 1
        return line, col, end_line, end_col

    # -- the pass ----------------------------------------------------------------------------
    def run(self) -> FileSummary:
        self._bind_module(self.tree.body)
        if "_dynamo" in self.source:
            self.config_flags = self._module_config()
        self._collect(self.tree.body, None, None, self.scope)
        self._rnns_of_subclasses()
        if "reorderable_logging_functions" in self.source or EMIT_HELPER in self.source:
            self._mark_reorderable()
        self._nodes = {info.id: node for info, node, _scope, _env in self.func_nodes}
        for info, node, scope, env in self.func_nodes:
            deadline.check()  # the file's time limit (mend.deadline)
            FunctionWalker(self, info, node, scope, env).walk()
        self._static_parameters()
        self._tensor_parameters()
        if self.has_compile:
            self._record_compile_calls()
        for check in FILE_CHECKERS:
            deadline.check()
            check(self)
        self.summary.imports = {k: b.value for k, b in self.scope.names.items() if b.kind == IMPORT}
        return self.summary

    # -- tensors passed to the file's own functions ---------------------------------------------
    def _static_parameters(self) -> None:
        """Parameters of the file's ``forward`` methods that a call passes a Python value (a tuple
        literal, a shape): not tensors, whatever the ``forward`` heuristic says. Those methods are walked
        again with them known (before tensors flow into parameters), so they pass no tensor on from them."""
        for info in self.summary.functions.values():
            for site in info.calls:
                if site.static_args:
                    self._pass_args(info, site, "static_args", self.static_params, forward_only=True)
        for fid, names in self.static_params.items():
            names &= _guessed_tensors(self._nodes[fid])
        self._rewalk([fid for fid, names in self.static_params.items() if names])

    def _rewalk(self, fids) -> None:
        entries = {info.id: (info, node, scope, env) for info, node, scope, env in self.func_nodes}
        for fid in fids:
            deadline.check()
            info, node, scope, env = entries[fid]
            self.summary.findings[:] = [f for f in self.summary.findings if f.func != fid]
            info.calls.clear()
            info.returns.clear()
            info.regions.clear()
            FunctionWalker(self, info, node, scope, env).walk()

    def _tensor_parameters(self, rounds: int = 3) -> None:
        """Walk again the functions that the file calls with a certain tensor where their parameter was
        not one (``self._update_causal_mask(mask, x, cache_position)``, ``self.rotary_emb(x,
        seq_len=cache_position[-1] + 1)``, a module-level helper), with those parameters as tensors. A
        walk can pass tensors further down, hence a few rounds."""
        for _ in range(rounds):
            grown = set()
            for info in list(self.summary.functions.values()):
                for site in info.calls:
                    if site.tensor_args:
                        grown |= self._pass_args(info, site, "tensor_args", self.tensor_params)
            if not grown:
                return
            self._rewalk(sorted(grown))

    def _pass_args(self, caller: FuncInfo, site: CallSite, which: str, table: dict[str, set[str]],
                   forward_only: bool = False) -> set[str]:
        """The callee of ``site`` in this file gets the parameters its ``which`` arguments bind (into
        ``table``); its id when that is new."""
        callee, bound = self._local_callee(caller, site.ref)
        info = self.summary.functions.get(callee or "")
        node = self._nodes.get(callee or "")
        if node is None or (forward_only and info.name != "forward"):
            return set()
        a = node.args
        params = [p.arg for p in (*a.posonlyargs, *a.args)][1 if bound and callee not in self.static_methods else 0:]
        names = {p.arg for p in (*a.posonlyargs, *a.args, *a.kwonlyargs)}
        got = {params[i] if isinstance(i, int) and i < len(params) else i for i in getattr(site, which)}
        got = {g for g in got if isinstance(g, str) and g in names}
        have = table.setdefault(callee, set())
        if got <= have:
            return set()
        have |= got
        return {callee}

    def _local_callee(self, caller: FuncInfo, ref: tuple) -> tuple[str | None, bool]:
        """The id of the function of this file that ``ref`` calls, and whether it is called bound."""
        cls = caller.cls
        parent = caller.parent
        while cls is None and parent:
            up = self.summary.functions.get(parent)
            cls, parent = (up.cls, up.parent) if up else (None, None)
        if ref[0] == "self" and cls in self.summary.classes:
            return self.summary.classes[cls].methods.get(ref[1]), True
        if ref[0] == "selfattr" and cls in self.summary.classes:
            for target in self.summary.classes[cls].attr_classes.get(ref[1], ()):
                local = target.removeprefix(self.module + ".")
                if local in self.summary.classes:
                    return self.summary.classes[local].methods.get("forward"), True
            return None, True
        if ref[0] == "qual" and ref[1].startswith(self.module + "."):
            fid = ref[1][len(self.module) + 1:]
            info = self.summary.functions.get(fid)
            if info is not None and info.cls is None and info.parent is None:
                return fid, False
        return None, False

    def report(self, code: str, node: ast.AST, scope: str | None, message: str) -> None:
        """A finding of driver code (see :class:`~mend.analyzers.static.rules.context.FileContext`)."""
        line, col, end_line, end_col = self.span(node)
        for f in self.summary.findings:
            if f.code == code and f.line == line and f.col == col:
                return
        self.summary.findings.append(Finding(code, message, line, col, end_line, end_col, None, (),
                                             {"scope": scope or ""}))

    # -- module level ----------------------------------------------------------------------
    def _mark_reorderable(self) -> None:
        """Module-level ``torch._dynamo.config.reorderable_logging_functions.add(f)`` (also under an
        ``if``): Dynamo runs calls of ``f`` after the graph instead of tracing them. mend's own reporting
        helper (:data:`EMIT_HELPER`) does not break the graph either: it calls an operator of the graph."""
        info = self.summary.functions.get(EMIT_HELPER)
        if info is not None:
            info.reorderable = True
        for stmt in self._module_stmts(self.tree.body):
            call = stmt.value if isinstance(stmt, ast.Expr) else None
            if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "add"
                    and len(call.args) == 1 and isinstance(call.args[0], ast.Name)):
                continue
            if self.scope.qualify(call.func.value) == "torch._dynamo.config.reorderable_logging_functions":
                info = self.summary.functions.get(call.args[0].id)
                if info is not None:
                    info.reorderable = True

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
                    for n in target_names(t):
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

    def _module_config(self) -> frozenset[str]:
        """``torch._dynamo.config.<flag> = True`` statements at module level (file-wide)."""
        flags = set()
        for stmt in self._module_stmts(self.tree.body):
            if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Constant) and stmt.value.value is True:
                for t in stmt.targets:
                    if isinstance(t, ast.Attribute) and self.scope.qualify(t.value) == "torch._dynamo.config":
                        flags.add(t.attr)
        return frozenset(flags)

    # -- classes and functions ---------------------------------------------------------------
    def _collect(self, body: list[ast.stmt], cls: str | None, parent: str | None, scope: Scope) -> None:
        """Register functions and classes (recursively), with their decorators and scopes."""
        for stmt in body:
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self._function(stmt, cls, parent, scope)
            elif isinstance(stmt, ast.ClassDef) and parent is None:
                self._class(stmt, cls, scope)
            elif isinstance(stmt, (ast.If, ast.Try)) and cls is None and parent is None:
                self._collect(stmt.body, cls, parent, scope)
                self._collect(stmt.orelse, cls, parent, scope)
                if isinstance(stmt, ast.Try):
                    for h in stmt.handlers:
                        self._collect(h.body, cls, parent, scope)

    def _class(self, stmt: ast.ClassDef, outer: str | None, scope: Scope) -> None:
        cid = f"{outer}.{stmt.name}" if outer else stmt.name
        bases = tuple(q for q in (scope.qualify(b) for b in stmt.bases) if q)
        self.summary.classes[cid] = ClassInfo(id=cid, line=stmt.lineno, bases=bases)
        self.class_facts[cid] = ClassFacts()
        self._collect(stmt.body, cid, None, scope)
        for base in bases:  # facts of a base class in the same file
            local = base[len(self.module) + 1:] if base.startswith(self.module + ".") else None
            if local in self.class_facts and local != cid:
                self._merge_facts(cid, local)

    def _rnns_of_subclasses(self) -> None:
        """A base class's method calls ``self.rnn(...)`` that a subclass in the file sets to an ``nn.LSTM`` (timm's
        sequencer: the base assigns an identity, ``LSTM2d`` the LSTM): the call runs a recurrent module wherever
        that subclass runs the method, so the base's facts hold the attribute too."""
        changed = True
        while changed:
            changed = False
            for cid, info in self.summary.classes.items():
                for base in info.bases:
                    local = base[len(self.module) + 1:] if base.startswith(self.module + ".") else None
                    if local in self.class_facts and local != cid:
                        new = self.class_facts[cid].rnn_attrs - self.class_facts[local].rnn_attrs
                        if new:
                            self.class_facts[local].rnn_attrs |= new
                            changed = True

    def _merge_facts(self, cid: str, base: str) -> None:
        f, b = self.class_facts[cid], self.class_facts[base]
        for attr in FACT_SETS:
            getattr(f, attr).update(getattr(b, attr))
        for k, v in b.attr_classes.items():
            f.attr_classes.setdefault(k, set()).update(v)
        self.summary.classes[cid].attr_classes = {k: tuple(sorted(v)) for k, v in f.attr_classes.items()}

    def _function(self, node: FunctionNode, cls: str | None, parent: str | None, scope: Scope) -> None:
        if parent:
            fid = f"{parent}.<locals>.{node.name}"
        else:
            fid = f"{cls}.{node.name}" if cls else node.name
        info = FuncInfo(id=fid, name=node.name, line=node.lineno, end_line=node.end_lineno or node.lineno,
                        cls=cls if not parent else None, parent=parent)
        self._decorators(node, info, scope)
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

    def _decorators(self, node: FunctionNode, info: FuncInfo, scope: Scope) -> None:
        """``@torch.compile`` (a compile site), ``@torch.compiler.disable``, ``@contextmanager``, and
        the Dynamo config flags a ``@torch._dynamo.config.patch`` above ``@torch.compile`` switches on."""
        for dec in node.decorator_list:
            target = dec.func if isinstance(dec, ast.Call) else dec
            q = scope.qualify(target)
            if q == "builtins.staticmethod" and info.cls:
                self.static_methods.add(info.id)
            elif q in COMPILE_NAMES:
                info.compiled, info.compile_line = True, dec.lineno
                line, col, _, _ = self.span(dec)
                self.summary.compile_sites.append(
                    CompileSite(line, col, "decorator", ("qual", f"{self.module}.{info.id}"), info.parent))
            elif q in DISABLE_NAMES:
                info.disabled = True
            elif q in CONTEXTMANAGER_NAMES:
                info.contextmanager = True
        flags = _config_patch(node, scope)
        if flags:
            self.patched[info.id] = flags

    def _class_facts(self, node: FunctionNode, cls: str, scope: Scope, nodes: list) -> None:
        """Record ``self.x = ...`` and ``self.register_buffer(...)`` facts from one method."""
        if not node.args.args:
            return
        me = node.args.args[0].arg
        facts = self.class_facts[cls]
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
                self._registered(facts, me, sub)
        self.summary.classes[cls].attr_classes = {k: tuple(sorted(v)) for k, v in facts.attr_classes.items()}

    @staticmethod
    def _registered(facts: ClassFacts, me: str, call: ast.Call) -> None:
        """``self.register_buffer("name", ...)`` / ``register_parameter`` / ``add_module``."""
        f = call.func
        if not (isinstance(f.value, ast.Name) and f.value.id == me and call.args
                and isinstance(call.args[0], ast.Constant) and isinstance(call.args[0].value, str)):
            return
        if f.attr in ("register_buffer", "register_parameter"):
            facts.tensor_attrs.add(call.args[0].value)
        elif f.attr == "add_module":
            facts.module_attrs.add(call.args[0].value)

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
        elif q in PARAMETER_NAMES or (q.startswith("torch.") and torch_call_kind(q) == T):
            facts.tensor_attrs.add(attr)
        elif q.startswith("torch.nn.") and q.rsplit(".", 1)[-1][:1].isupper():
            facts.module_attrs.add(attr)
            if q.rsplit(".", 1)[-1] in RNN_MODULES:
                facts.rnn_attrs.add(attr)
            classes = {c for c in _instantiated(value, scope) if not c.startswith("torch.")}
            if classes:
                facts.attr_classes.setdefault(attr, set()).update(classes)
        elif tag.startswith("instance:") and not q.startswith(("torch.", "builtins.")):
            facts.module_attrs.add(attr)
            facts.attr_classes.setdefault(attr, set()).add(q)

    # -- references ------------------------------------------------------------------------
    def ref_of(self, expr: ast.AST, scope: Scope, cls: str | None, self_name: str | None,
               local_values: dict[str, object] | None = None, depth: int = 0) -> Ref | None:
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
                return self._var_ref(expr.id, b, scope, cls, self_name, local_values, depth)
        q = scope.qualify(expr)
        if q and not q.startswith("builtins."):
            return ("qual", q)
        return None

    def _var_ref(self, name: str, b: Binding, scope: Scope, cls: str | None, self_name: str | None,
                 local_values: dict[str, object] | None, depth: int) -> Ref | None:
        if local_values and name in local_values:
            v = local_values[name]
            if isinstance(v, tuple):  # (call, index) from tuple unpacking
                call, idx = v
                q = scope.qualify(call.func)
                return ("ret", q, str(idx)) if q else None
            return self.ref_of(v, scope, cls, self_name, None, depth + 1)
        if b.value.startswith("instance:"):
            return ("instance", b.value[len("instance:"):])
        return None

    # -- driver code -------------------------------------------------------------------------
    def driver_scopes(self) -> list[DriverScope]:
        """The module body and every function that mentions ``compile``: where compiled objects are
        created and called (a scope that never mentions compile creates no compiled object)."""
        if self._driver_scopes is None:
            lines = self.index.lines
            scopes = [_driver_scope(self.tree.body, self.scope, None, None, None)]
            for info, node, fscope, _env in self.func_nodes:
                if "compile" not in "\n".join(lines[node.lineno - 1:(node.end_lineno or node.lineno)]):
                    continue
                self_name = node.args.args[0].arg if (info.cls and node.args.args) else None
                scopes.append(_driver_scope(node.body, fscope, info, self_name, node))
            self._driver_scopes = scopes
        return self._driver_scopes

    def _record_compile_calls(self) -> None:
        """Compile sites of ``torch.compile(obj)`` and ``model.compile()`` calls, in every driver scope."""
        for ds in self.driver_scopes():
            fid = ds.info.id if ds.info else None
            cls = ds.info.cls if ds.info else None
            for n, _loops in ds.nodes:
                if not isinstance(n, ast.Call):
                    continue
                if n.args and ds.scope.qualify(n.func) in COMPILE_NAMES:
                    target = self.ref_of(n.args[0], ds.scope, cls, ds.self_name, ds.local_values)
                    line, col, _, _ = self.span(n)
                    self.summary.compile_sites.append(CompileSite(line, col, "call", target, fid))
                elif (isinstance(n.func, ast.Attribute) and n.func.attr == "compile" and not n.args
                      and not isinstance(n.func.value, ast.Call)):
                    target = self.ref_of(n.func.value, ds.scope, cls, ds.self_name, ds.local_values)
                    if target is not None and target[0] == "instance":
                        line, col, _, _ = self.span(n)
                        self.summary.compile_sites.append(CompileSite(line, col, "method", target, fid))


def _guessed_tensors(node: FunctionNode) -> set[str]:
    """The parameters of a ``forward`` that the tensor heuristic takes for tensors: no annotation, no
    default, used as ``name.attr`` or ``name[...]``."""
    a = node.args
    positional = [*a.posonlyargs, *a.args]
    bare = {p.arg for p in positional[:len(positional) - len(a.defaults)] if p.annotation is None}
    bare |= {p.arg for p, d in zip(a.kwonlyargs, a.kw_defaults) if d is None and p.annotation is None}
    used = {n.value.id for n in ast.walk(node) if isinstance(n, (ast.Attribute, ast.Subscript))
            and isinstance(n.value, ast.Name) and n.value.id in bare}
    return used


def _instantiated(value: ast.AST, scope: Scope) -> set[str]:
    """Classes (capitalised callables) instantiated anywhere inside ``value``."""
    out = set()
    for sub in ast.walk(value):
        if isinstance(sub, ast.Call):
            q = scope.qualify(sub.func)
            if q and q.rsplit(".", 1)[-1][:1].isupper():
                out.add(q)
    return out


def _config_patch(node: FunctionNode, scope: Scope) -> frozenset[str]:
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
            flags.update(kw.arg for kw in dec.keywords
                         if kw.arg and isinstance(kw.value, ast.Constant) and kw.value.value is True)
            if (len(dec.args) == 2 and isinstance(dec.args[0], ast.Constant)
                    and isinstance(dec.args[1], ast.Constant) and dec.args[1].value is True):
                flags.add(str(dec.args[0].value))
    return frozenset(flags)


def _driver_scope(body: list[ast.stmt], scope: Scope, info: FuncInfo | None, self_name: str | None,
                  node: FunctionNode | None) -> DriverScope:
    ds = DriverScope(body, scope, info, self_name, node, list(scope_nodes(body)))
    for n, _loops in ds.nodes:
        if isinstance(n, ast.Assign) and len(n.targets) == 1:
            t = n.targets[0]
            if isinstance(t, ast.Name):
                ds.local_values[t.id] = n.value
            elif isinstance(t, ast.Tuple) and isinstance(n.value, ast.Call):
                for i, e in enumerate(t.elts):
                    if isinstance(e, ast.Name):
                        ds.local_values[e.id] = (n.value, i)
    return ds


def scope_nodes(body: list[ast.stmt], loops: tuple[ast.stmt, ...] = ()) -> Iterator[tuple[ast.AST, tuple]]:
    """Nodes of one scope (not descending into nested functions/classes), with their enclosing loops."""
    for s in body:
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            header = [s.iter, s.target] if isinstance(s, (ast.For, ast.AsyncFor)) else [s.test]
            for h in header:
                yield from ((n, loops) for n in walk_nodes(h))
            yield from scope_nodes(s.body, loops + (s,))
            yield from scope_nodes(s.orelse, loops)
            continue
        blocks = [part for part in (getattr(s, f, None) for f in ("body", "orelse", "finalbody", "handlers", "cases"))
                  if isinstance(part, list) and part and isinstance(part[0], (ast.stmt, ast.excepthandler, ast.match_case))]
        if blocks:
            yield from _compound_nodes(s, blocks, loops)
        else:
            yield from ((n, loops) for n in walk_nodes(s) if not isinstance(n, ast.Lambda))


def _compound_nodes(s: ast.stmt, blocks: list[list], loops: tuple[ast.stmt, ...]) -> Iterator[tuple[ast.AST, tuple]]:
    """``if``/``try``/``with``/``match``: the header expressions, then the statements of every block."""
    for child in ast.iter_child_nodes(s):
        if isinstance(child, (ast.expr, ast.withitem)):
            yield from ((n, loops) for n in walk_nodes(child))
    for block in blocks:
        for item in block:
            if isinstance(item, (ast.excepthandler, ast.match_case)):
                yield from scope_nodes(item.body, loops)
            else:
                yield from scope_nodes([item], loops)
