"""The single walk over one function body, dispatching each node to the rule checkers.

:class:`FunctionWalker` visits every statement once, in order: it keeps the tensor kinds of the
function's names (:class:`~mend.analyzers.static.tensors.TensorKinds`), skips branches that are dead
under compile (``torch.compiler.is_compiling()`` and its spellings), tracks the enclosing ``try``/loop/
``with`` statements (:class:`~mend.analyzers.static.rules.context.Region`) and ``if self.training:``-style
mode guards, records the calls the project index follows, and hands each node to the checkers
registered for its kind; the function checkers run once the body is done. The walker is the
:class:`~mend.analyzers.static.rules.context.Context` the checkers see; it knows no rule.
"""

from __future__ import annotations

import ast
from typing import Protocol

from mend import deadline
from mend.analyzers.static import tensors as tk
from mend.analyzers.static import torch_facts
from mend.analyzers.static.names import CLASS, DEF, IMPORT, VAR, Scope, children, target_names
from mend.analyzers.static.rules.base import CHECKERS, FUNCTION_CHECKERS, RULES, Finding
from mend.analyzers.static.rules.context import ClassFacts, FunctionNode, Region, Span
from mend.analyzers.static.summary import CallSite, FileSummary, FuncInfo, Ref


class ModuleFacts(Protocol):
    """What a function's walk reads from its module's analysis (:class:`mend.analyzers.static.module.
    ModuleAnalyzer` has it): the file's summary, facts about its classes and parameters, positions and
    references."""

    summary: FileSummary
    class_facts: dict[str, ClassFacts]
    patched: dict[str, frozenset[str]]
    config_flags: frozenset[str]
    func_nodes: list[tuple[FuncInfo, FunctionNode, Scope, dict]]
    tensor_params: dict[str, set[str]]
    static_params: dict[str, set[str]]
    static_methods: set[str]

    def span(self, node: ast.AST) -> Span: ...

    def value_tag(self, value: ast.AST, scope: Scope) -> str: ...

    def ref_of(self, expr: ast.AST, scope: Scope, cls: str | None, self_name: str | None,
               local_values: dict[str, object] | None = None, depth: int = 0) -> Ref | None: ...


def under_compile(expr: ast.AST, scope: Scope, fixed: dict[str, bool] | None = None) -> bool | None:
    """The value of ``expr`` under torch.compile when it is fixed (``is_compiling()`` and friends, and
    the names in ``fixed``: locals assigned such a value, ``is_tracing = torch.jit.is_tracing() or
    is_torchdynamo_compiling()``)."""
    if isinstance(expr, ast.Name):
        return fixed.get(expr.id) if fixed else None
    if isinstance(expr, ast.Attribute) and expr.attr == "active" and isinstance(expr.value, ast.Name) \
            and expr.value.id in torch_facts.FOLD_HELPERS:
        return False  # set only while the helper runs the method eagerly, untraced
    if isinstance(expr, ast.Call) and not expr.args:
        q = scope.qualify(expr.func)
        if q and torch_facts.is_compiling_call(q):
            return True
        if q in torch_facts.FALSE_UNDER_COMPILE:
            return False
        return None
    if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not):
        v = under_compile(expr.operand, scope, fixed)
        return None if v is None else not v
    if isinstance(expr, ast.BoolOp):
        vals = [under_compile(v, scope, fixed) for v in expr.values]
        if isinstance(expr.op, ast.And):
            return False if False in vals else (True if all(v is True for v in vals) else None)
        return True if True in vals else (False if all(v is False for v in vals) else None)
    return None


def _terminates(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise))


class FunctionWalker(tk.TensorKinds):
    """Walks one function body once: tensor kinds, dead branches, regions, rule dispatch."""

    def __init__(self, mod: ModuleFacts, info: FuncInfo, node: FunctionNode, scope: Scope, env: dict) -> None:
        self.mod = mod
        self.info = info
        self.node = node
        self.scope = scope
        self.env = dict(env)
        self.bool_names = set()
        self.ptr_names = set()
        self.local_values = {}
        self.optional_tensors = set()
        self.tensor_or_none = set()
        self.tensor_params = frozenset(mod.tensor_params.get(info.id, ()))
        self.static_params = frozenset(mod.static_params.get(info.id, ()))
        self.cls = info.cls
        self.facts = mod.class_facts.get(self.cls) if self.cls else None
        bound = self.cls and node.args.args and info.id not in mod.static_methods
        self.self_name = node.args.args[0].arg if bound else None
        self.is_forward = bool(self.cls) and info.name == "forward"
        self.loop_vars = {}
        self.method_loop_vars: dict[str, str] = {}  # the same, through enumerate(): for method calls only
        self.regions: list[Region] = []
        self.findings: list[Finding] = []
        self._seen: set[tuple[str, int, int]] = set()
        self.config_flags = mod.config_flags | mod.patched.get(info.id, frozenset())
        self.loop_depth = 0
        self.mode_guards: list[str] = []  # enclosing `if self.training:`-style conditions
        self.comp_kinds = {}
        self.bound_lines: dict[str, int] = {}  # name -> line of the value last assigned to it
        self.tensor_lists = set()
        self.mode_names: dict[str, str] = {}  # names that hold a tensor only in a mode -> the mode
        self.fixed: dict[str, bool] = {}  # locals whose value under compile is known (`is_tracing = ...`)
        self._with_items: set[int] = set()
        self.bind_params()

    # -- the Context of the checkers -------------------------------------------------------------
    def span(self, node: ast.AST) -> Span:
        return self.mod.span(node)

    def report(self, code: str, node: ast.AST, message: str | None = None,
               requires: tuple[tuple[str, str], ...] = (), **data: object) -> None:
        line, col, end_line, end_col = self.mod.span(node)
        key = (code, line, col)
        if key in self._seen:
            return
        self._seen.add(key)
        data = dict(data)
        message = message or RULES[code].summary
        mode = self.mode_guards[-1] if self.mode_guards else self.name_mode(node)
        if mode and "mode" not in data:
            data["mode"] = mode
            message += f" (only when `{mode}`)"
        self.findings.append(Finding(code, message, line, col, end_line, end_col, self.info.id, requires, data))

    def resumed_input(self, expr: ast.AST) -> bool:
        """``expr`` is a name bound before a graph break earlier in this function: after that break
        Dynamo resumes in a new frame whose inputs hold the name's value."""
        line = self.bound_lines.get(expr.id) if isinstance(expr, ast.Name) else None
        return line is not None and any(
            line < f.line and RULES[f.code].kind == "break" and "mode" not in f.data for f in self.findings)

    def in_with_item(self, call: ast.Call) -> bool:
        return id(call) in self._with_items

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
            return self.mod.value_tag(expr, self.scope) == "lock"
        if isinstance(expr, ast.Name):
            b = self.scope.lookup(expr.id)
            return b is not None and b.kind == VAR and b.value == "lock"
        attr = self.is_self_attr(expr)
        return bool(attr and self.facts and attr in self.facts.lock_attrs)

    # -- modes the analyzer cannot see -----------------------------------------------------------
    def mode_test(self, expr: ast.AST) -> str | None:
        """The text of ``expr`` when it tests a *mode* the analyzer cannot see: ``self.training``
        (train vs eval), a dtype (``x.dtype == torch.float16``, ``x.is_floating_point()``), grad mode,
        or the attention implementation a model is configured with (``config._attn_implementation ==
        "flash_attention_2"``)."""
        e = expr.operand if isinstance(expr, ast.UnaryOp) and isinstance(expr.op, ast.Not) else expr
        if isinstance(e, ast.Attribute) and e.attr == "training" and self.is_self_attr(e):
            return ast.unparse(expr)
        if (isinstance(e, ast.Compare) and len(e.ops) == 1 and isinstance(e.ops[0], (ast.Is, ast.IsNot, ast.Eq, ast.NotEq))
                and isinstance(e.left, ast.Attribute) and e.left.attr == "training" and self.is_self_attr(e.left)
                and isinstance(e.comparators[0], ast.Constant) and isinstance(e.comparators[0].value, bool)):
            return ast.unparse(expr)  # `self.training is False`
        if isinstance(e, ast.Compare):
            for o in (e.left, *e.comparators):
                if isinstance(o, ast.Attribute) and o.attr == "dtype":
                    return ast.unparse(expr)
                if (isinstance(o, ast.Attribute) and o.attr in torch_facts.ATTENTION_IMPLEMENTATION_ATTRS
                        and isinstance(e.ops[0], (ast.Eq, ast.In))):
                    return ast.unparse(expr)  # `if self.config._attn_implementation == "flash_attention_2":`
        if (isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute)
                and e.func.attr in ("is_floating_point", "is_complex")):
            return ast.unparse(expr)
        if isinstance(e, ast.Call) and not e.args and self.scope.qualify(e.func) in torch_facts.GRAD_MODE_TESTS:
            return ast.unparse(expr)
        return None

    def mode_guard(self, test: ast.AST) -> str | None:
        """The mode test that an ``if`` body runs under: ``if self.training:``, ``if self.training and
        self.layerdrop > 0:``, ``if h.dtype == torch.float16 and <tensor test>:``."""
        m = self.mode_test(test)
        if m is None and isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            m = next((t for t in map(self.mode_test, test.values) if t is not None), None)
        if m is None and isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
            # `not is_compiling() or torch.is_grad_enabled()`: under compile only the other operands decide
            live = [v for v in test.values if under_compile(v, self.scope, self.fixed) is not False]
            if len(live) == 1:
                m = self.mode_test(live[0])
        return m

    def mode_prefixed(self, test: ast.AST) -> str | None:
        """For ``a and b and <tensor condition>``: the first mode test among the operands before the
        first tensor-valued one. The tensor condition is evaluated (and breaks) only in that mode. A
        LayerDrop guard among them (``self.training and p > 0 and u < p``) is the answer whatever comes
        before it: the test then runs only when LayerDrop is configured."""
        if not (isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And)):
            return None
        first = None
        for i, v in enumerate(test.values):
            if self.kind(v) == tk.T:
                return first
            configured = self._layerdrop_configured(v, test.values[i + 1:])
            if configured is not None:
                return configured
            first = first or self.mode_test(v)
        return first

    def _layerdrop_configured(self, test: ast.AST, rest: list[ast.AST]) -> str | None:
        """``p > 0`` in ``p > 0 and u < p`` (or ``p > u``), the guard ``mend fix`` puts before a LayerDrop test
        (``u`` a ``torch.rand`` or ``random.uniform`` draw, ``p`` a configured probability): the tensor test
        runs, and breaks, only when LayerDrop is configured, a mode like ``self.training``."""
        if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Gt)
                and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == 0
                and isinstance(test.left, (ast.Name, ast.Attribute)) and rest):
            return None
        bound = ast.dump(test.left)
        if not (isinstance(test.left, ast.Name) or self.is_self_attr(test.left)
                or (isinstance(test.left, ast.Attribute) and self.is_self_attr(test.left.value) == "config")):
            return None  # `p`, `self.layerdrop`, `self.config.layerdrop`
        nxt = rest[0]
        if not (isinstance(nxt, ast.Compare) and len(nxt.ops) == 1):
            return None
        left, right = nxt.left, nxt.comparators[0]
        if isinstance(nxt.ops[0], ast.Lt) and ast.dump(right) == bound:
            draw = left
        elif isinstance(nxt.ops[0], ast.Gt) and ast.dump(left) == bound:
            draw = right
        else:
            return None
        value = self.local_values.get(draw.id) if isinstance(draw, ast.Name) else None
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) \
                and value.func.id == torch_facts.DRAWN_HELPER and len(value.args) == 1:
            value = value.args[0]  # the draw, as mend fix wraps it
        if isinstance(value, ast.Call) and self.scope.qualify(value.func) in ("torch.rand", "random.uniform"):
            return ast.unparse(test)
        return None

    def name_mode(self, expr: ast.AST) -> str | None:
        """The mode of a name in ``expr`` that holds a tensor only in a mode: assigned under ``if
        self.training:`` (``skip = torch.rand([]) < p``) or from ``self.training and <tensor test>``.
        A finding on such an expression is reported for that mode, as one inside the ``if``."""
        if not self.mode_names or not isinstance(expr, ast.AST):
            return None
        for n in ast.walk(expr):
            if isinstance(n, ast.Name) and n.id in self.mode_names and self.env.get(n.id) == tk.T:
                return self.mode_names[n.id]
        return None

    def _bind_name(self, name: str, value: ast.AST | None, kind: int) -> None:
        super()._bind_name(name, value, kind)
        if value is None:
            self.bound_lines.pop(name, None)
        else:
            self.bound_lines[name] = value.lineno
        mode = None
        if kind == tk.T:
            mode = self.mode_guards[-1] if self.mode_guards else (
                self.mode_prefixed(value) if value is not None else None)
        if mode is None:
            self.mode_names.pop(name, None)
        else:
            self.mode_names[name] = mode

    # -- the walk --------------------------------------------------------------------------------
    def walk(self) -> None:
        self._decorated()
        self.block(self.node.body)
        for check in FUNCTION_CHECKERS:
            check(self)
        self._record_regions()
        self.mod.summary.findings.extend(self.findings)

    def _decorated(self) -> None:
        """A decorator of the tree replaces this function with the function it returns (transformers'
        ``dynamic_rope_update`` returns its nested ``wrapper``): Dynamo traces that one whenever this
        one is called, so it is recorded as a callee (what the decorator returns, ``("ret", d, "0")``)."""
        for dec in getattr(self.node, "decorator_list", ()):
            q = self.scope.qualify(dec) if isinstance(dec, (ast.Name, ast.Attribute)) else None
            if q and not q.startswith(("builtins.", "torch.", "functools.", "typing.")):
                line, col, end_line, end_col = self.mod.span(dec)
                self.info.calls.append(CallSite(("ret", q, "0"), line, col, end_line, end_col))

    def block(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            deadline.check()  # the file's time limit (mend.deadline)
            if self.stmt(stmt):
                break  # the rest of the block is dead under compile

    def stmt(self, s: ast.stmt) -> bool:
        """Walk one statement. Returns True when the code after it is dead under compile."""
        walk = _STATEMENTS.get(s.__class__)
        if walk is not None:
            return walk(self, s)
        for child in ast.iter_child_nodes(s):
            if isinstance(child, ast.expr):
                self.expr(child)
        return False

    def _def(self, s: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
        """A nested function: its decorators run here; its body is walked on its own, with the kinds
        of the names at this point."""
        nested = self.mod.summary.functions.get(f"{self.info.id}.<locals>.{s.name}")
        for d in s.decorator_list:
            self.expr(d)
        if nested is not None:
            for i, entry in enumerate(self.mod.func_nodes):
                if entry[0] is nested:
                    self.mod.func_nodes[i] = (entry[0], entry[1], entry[2], dict(self.env))
        return False

    def _class(self, s: ast.ClassDef) -> bool:
        return False

    def _if(self, s: ast.If) -> bool:
        fixed = under_compile(s.test, self.scope, self.fixed)
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
        narrowed = self.narrow(s.test)  # `if mask is not None:`: a tensor in the body
        self.block(s.body)
        self.widen(narrowed)
        if mode is not None:
            self.mode_guards.pop()
        self.block(s.orelse)
        return False

    def _while(self, s: ast.While) -> bool:
        self.dispatch("while", s)
        self.expr(s.test)
        self._loop(s)
        self.block(s.orelse)
        return False

    def _for(self, s: ast.For | ast.AsyncFor) -> bool:
        self.expr(s.iter)
        self.bind_iteration(s.target, s.iter)
        attr = self.is_self_attr(s.iter)
        if attr and self.facts and attr in self.facts.module_attrs:
            for n in target_names(s.target):
                self.loop_vars[n] = attr
        it = s.iter
        if (isinstance(it, ast.Call) and len(it.args) == 1 and self.qualify(it.func) == "builtins.enumerate"
                and isinstance(s.target, ast.Tuple) and len(s.target.elts) == 2
                and isinstance(s.target.elts[1], ast.Name) and self._self_module(it.args[0])):
            # `for i, layer in enumerate(self.layers): layer.reset()`; only for method calls: a
            # break reached through `layer(x)` depends on the layer's inputs, which the
            # transitive frame-skip check cannot see
            self.method_loop_vars[s.target.elts[1].id] = self.is_self_attr(it.args[0])
        self._loop(s)
        self.block(s.orelse)
        return False

    def _loop(self, s: ast.While | ast.For | ast.AsyncFor) -> None:
        start = len(self.findings)
        self.loop_depth += 1
        self.block(s.body)
        self.loop_depth -= 1
        self.regions.append(Region("loop", s, start, len(self.findings)))

    def _try(self, s: ast.Try) -> bool:
        start = len(self.findings)
        self.block(s.body)
        self.regions.append(Region("try", s, start, len(self.findings)))
        for h in s.handlers:
            self.block(h.body)
        self.block(s.orelse)
        self.block(s.finalbody)
        return False

    def _with(self, s: ast.With | ast.AsyncWith) -> bool:
        self.dispatch("with", s)
        for item in s.items:
            self._with_items.add(id(item.context_expr))
            self.expr(item.context_expr)
            if item.optional_vars is not None:
                for n in target_names(item.optional_vars):
                    self.env[n] = tk.N
        start = len(self.findings)
        self.block(s.body)
        for item in s.items:
            ctx = item.context_expr
            if isinstance(ctx, ast.Call):
                ref = self.mod.ref_of(ctx.func, self.scope, self.cls, self.self_name)
                if ref is not None:
                    self.regions.append(Region("ctx", s, start, len(self.findings), (("contextmanager", "|".join(ref)),)))
        return False

    def _assign_stmt(self, s: ast.Assign) -> bool:
        self.expr(s.value)
        for t in s.targets:
            self.expr_targets(t)
        self.dispatch("assign", s)
        k = self.kind(s.value)
        value = under_compile(s.value, self.scope, self.fixed)
        for t in s.targets:
            if k == tk.T and isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                self.tensor_lists.add(t.value.id)  # `sizes[i] = offsets[i + 1] - offsets[i]`
            self.assign(t, s.value, k)
            for name in target_names(t):
                if value is None or not isinstance(t, ast.Name):
                    self.fixed.pop(name, None)
                else:
                    self.fixed[name] = value
        return False

    def _annassign(self, s: ast.AnnAssign) -> bool:
        if s.value is not None:
            self.expr(s.value)
            self.assign(s.target, s.value, self.kind(s.value))
        return False

    def _augassign(self, s: ast.AugAssign) -> bool:
        self.expr(s.value)
        self.expr_targets(s.target)
        self.dispatch("augassign", s)
        if isinstance(s.target, ast.Name):
            kinds = (self.kind(s.target), self.kind(s.value))
            self.env[s.target.id] = tk.S if tk.S in kinds else max(kinds)
        return False

    def _assert(self, s: ast.Assert) -> bool:
        self.expr(s.test)
        if s.msg is not None:
            self.expr(s.msg)
        self.dispatch("assert", s)
        return False

    def _match(self, s: ast.Match) -> bool:
        self.expr(s.subject)
        for case in s.cases:
            self.block(case.body)
        return False

    def _return_or_raise(self, s: ast.Return | ast.Raise) -> bool:
        for child in ast.iter_child_nodes(s):
            self.expr(child)
        if isinstance(s, ast.Return) and s.value is not None:
            elts = s.value.elts if isinstance(s.value, ast.Tuple) else [s.value]
            self.info.returns.append(tuple(
                self.mod.ref_of(e, self.scope, self.cls, self.self_name, self.local_values) for e in elts[:8]))
        return False

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
            if self._walked_apart(n, stack):
                continue
            t = type(n)
            if t is ast.Call and self._captured(n):
                continue
            if t is ast.Call:
                self.dispatch("call", n)
                self._record_call(n)
            elif t is ast.IfExp:
                self.dispatch("ifexp", n)
            elif t is ast.Subscript and isinstance(n.ctx, ast.Load):
                self.dispatch("subscript", n)
                v = n.value
                if v.__class__ is ast.Name and self.env.get(v.id) == tk.M and tk.array_index(n.slice):
                    self.env[v.id] = tk.T  # `spatial_shapes[:, 0]`: only an array takes that index
            elif t is ast.JoinedStr:
                self.dispatch("fstring", n)
            elif t is ast.BinOp:
                self.dispatch("binop", n)
            elif t is ast.NamedExpr:
                self.assign(n.target, n.value, self.kind(n.value))
            elif t is ast.Name or t is ast.Constant:
                continue
            elif t in _COMPREHENSIONS:
                self._comprehension(n)
                continue
            stack.extend(children(n))

    def _walked_apart(self, n: ast.AST, stack: list[ast.AST]) -> bool:
        """A conditional expression decided under compile (only its live side goes on ``stack``), or an ``and``
        chain with a mode test (:meth:`_moded_operands`): True when ``n`` is handled here."""
        if isinstance(n, ast.IfExp):
            fixed = under_compile(n.test, self.scope, self.fixed)
            if fixed is not None:
                stack.append(n.body if fixed else n.orelse)
                return True
            return False
        return isinstance(n, ast.BoolOp) and self._moded_operands(n)

    def _moded_operands(self, n: ast.BoolOp) -> bool:
        """``self.training and random.random() < p``: the operands after a mode test run only in that mode,
        and are walked under it (their findings say so). False when ``n`` has no such operand."""
        if not isinstance(n.op, ast.And):
            return False
        at = next((i for i, v in enumerate(n.values[:-1]) if self.mode_test(v) is not None), None)
        if at is None:
            return False
        for v in n.values[:at + 1]:
            self.expr(v)
        self.mode_guards.append(self.mode_test(n.values[at]))
        try:
            for v in n.values[at + 1:]:
                self.expr(v)
        finally:
            self.mode_guards.pop()
        return True

    def _captured(self, call: ast.Call) -> bool:
        """``_mend_captured(lambda: E)`` / ``_mend_tensor_check(lambda: E)`` / ``_mend_rnn(lambda: E)`` (added by
        ``mend fix``): walk ``E`` with
        the Dynamo flags the helper sets while tracing it (capture; ``allow_rnn``)."""
        flags = {torch_facts.CAPTURE_HELPER: torch_facts.CAPTURE_SCOPE_FLAGS,
                 torch_facts.TENSOR_CHECK_HELPER: torch_facts.CAPTURE_SCOPE_FLAGS,
                 torch_facts.RNN_HELPER: frozenset({torch_facts.RNN_FLAG})}.get(getattr(call.func, "id", None))
        if not (flags and len(call.args) == 1 and isinstance(call.args[0], ast.Lambda) and not call.keywords):
            return False
        saved = self.config_flags
        self.config_flags = saved | flags
        try:
            self.expr(call.args[0].body)
        finally:
            self.config_flags = saved
        return True

    def _comprehension(self, n: ast.ListComp | ast.SetComp | ast.GeneratorExp | ast.DictComp) -> None:
        """Generators in order (each target bound from its iterable), then the element; the targets
        are local to the comprehension."""
        saved: dict[str, int | None] = {}
        for gen in n.generators:
            self.expr(gen.iter)
            for name in target_names(gen.target):
                saved.setdefault(name, self.env.get(name))
            self.bind_iteration(gen.target, gen.iter)
            for cond in gen.ifs:
                self.expr(cond)
                self.dispatch("compfilter", cond)
        for part in (n.key, n.value) if isinstance(n, ast.DictComp) else (n.elt,):
            self.expr(part)
        if not isinstance(n, ast.DictComp):
            self.comp_kinds[id(n)] = tk.T if self.holds_tensor(n.elt) else tk.N
        for name, kind in saved.items():
            if kind is None:
                self.env.pop(name, None)
            else:
                self.env[name] = kind

    def dispatch(self, kind: str, node: ast.AST) -> None:
        for fn in CHECKERS[kind]:
            fn(self, node)

    # -- what the project index needs --------------------------------------------------------------
    def _record_regions(self) -> None:
        for r in self.regions:
            body = r.node.body
            line, col, _, _ = self.mod.span(r.node)
            self.info.regions.append((r.kind, line, col, body[0].lineno, body[-1].end_lineno or body[-1].lineno,
                                      tuple(r.requires)))

    def call_ref(self, call: ast.Call) -> Ref | None:
        """A symbolic reference to the callee of ``call`` when it may be defined in the checked tree."""
        f = call.func
        if isinstance(f, ast.Name):
            ref = self._name_ref(f)
        elif isinstance(f, ast.Attribute):
            ref = self._attribute_ref(f)
        elif isinstance(f, ast.Subscript) and self._self_module(f.value):
            ref = ("selfattr", self.is_self_attr(f.value))
        else:
            ref = None
        if ref is not None and ref[-1]:
            return ref
        return None

    def _name_ref(self, f: ast.Name) -> Ref | None:
        b = self.scope.lookup(f.id)
        if b is not None and b.kind in (DEF, CLASS, IMPORT):
            q = self.scope.qualify(f) or ""
            return None if q.startswith("torch.") else ("qual", q)
        if f.id in self.loop_vars:
            return ("selfattr", self.loop_vars[f.id])
        return None

    def _attribute_ref(self, f: ast.Attribute) -> Ref | None:
        attr = self.is_self_attr(f)
        sub = self.is_self_attr(f.value)
        v = f.value
        if attr is not None:
            return ("selfattr", attr) if (self.facts and attr in self.facts.module_attrs) else ("self", attr)
        if sub is not None and self.facts and sub in self.facts.module_attrs:
            return ("selfattrm", sub, f.attr)  # a method of a submodule: `self.encoder.reset()`
        if isinstance(v, ast.Name) and v.id in self.loop_vars:
            return ("selfattrm", self.loop_vars[v.id], f.attr)  # `for layer in self.layers: layer.reset()`
        if isinstance(v, ast.Name) and v.id in self.method_loop_vars:
            return ("selfattrm", self.method_loop_vars[v.id], f.attr)
        if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super":
            return ("super", f.attr)
        q = self.qualify(f)
        if q and not q.startswith(("builtins.", "torch.")):
            return ("qual", q)
        return None

    def _record_call(self, call: ast.Call) -> None:
        ref = self.call_ref(call)
        if ref is not None:
            line, col, end_line, end_col = self.mod.span(call)
            tensors = tuple(i for i, a in enumerate(call.args) if self.holds_tensor(a)) + tuple(
                k.arg for k in call.keywords if k.arg and self.holds_tensor(k.value))
            statics = tuple(i for i, a in enumerate(call.args) if self.python_value(a)) + tuple(
                k.arg for k in call.keywords if k.arg and self.python_value(k.value))
            self.info.calls.append(CallSite(ref, line, col, end_line, end_col, self.loop_depth > 0, tensors, statics))


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)

_STATEMENTS = {
    ast.FunctionDef: FunctionWalker._def,
    ast.AsyncFunctionDef: FunctionWalker._def,
    ast.ClassDef: FunctionWalker._class,
    ast.If: FunctionWalker._if,
    ast.While: FunctionWalker._while,
    ast.For: FunctionWalker._for,
    ast.AsyncFor: FunctionWalker._for,
    ast.Try: FunctionWalker._try,
    ast.With: FunctionWalker._with,
    ast.AsyncWith: FunctionWalker._with,
    ast.Assign: FunctionWalker._assign_stmt,
    ast.AnnAssign: FunctionWalker._annassign,
    ast.AugAssign: FunctionWalker._augassign,
    ast.Match: FunctionWalker._match,
    ast.Assert: FunctionWalker._assert,
    ast.Return: FunctionWalker._return_or_raise,
    ast.Raise: FunctionWalker._return_or_raise,
}
if hasattr(ast, "TryStar"):
    _STATEMENTS[ast.TryStar] = FunctionWalker._try

