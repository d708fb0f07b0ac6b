"""The project index: which functions Dynamo traces, across the files of the checked tree.

Roots are

* functions decorated with ``torch.compile`` (any spelling, with or without arguments);
* objects wrapped at a call site: ``torch.compile(fn)``, ``torch.compile(Model())``,
  ``m = Model(); torch.compile(m)``, ``model.compile()``, and ``fn, *_ = harness(); torch.compile(fn)``
  where ``harness`` returns a tuple whose element is a function of the tree;
* with ``regions = "modules"`` (the default), ``forward`` of every ``nn.Module`` subclass: a class
  whose bases reach ``torch.nn.Module`` (or any ``torch.nn`` module class) through classes of the
  tree, or a class defining ``forward`` whose bases reach a class defined outside the checked tree;
* ``entry-points`` from ``[tool.mend]`` (``"pkg.mod:Class.method"`` or ``"pkg.mod.func"``).

Everything reachable from a root through calls that resolve in the tree is traced too: functions of
the same module and of imported modules of the tree, ``self.method()`` (through base classes),
``super().method()``, submodule calls ``self.attn(x)`` when ``__init__`` assigns the attribute a class
of the tree (also ``nn.ModuleList``/``nn.Sequential`` of them, iterated or indexed), and nested
functions. Functions decorated ``@torch.compiler.disable`` are never traced; calling one from traced
code is reported (MND504). Modules imported by the tree but not given on the command line are
loaded from disk when a reference needs them (so a pre-commit run on one changed file still sees
its base classes), without reporting their findings.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from mend.analyzers.static.rules import RULES
from mend.analyzers.static.rules.base import Finding
from mend.analyzers.static.summary import CompileSite, FileSummary, FuncInfo, Ref


def _outside(base: str) -> bool:
    """``base`` is a class of a library, not of the standard ones a plain class derives from."""
    return not base.startswith(("builtins.", "typing.", "abc.", "enum.", "collections."))


MODULE_BASES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
NOT_MODULES = frozenset({"torch.nn.Parameter", "torch.nn.parameter.Parameter", "torch.nn.Buffer"})


@dataclass(frozen=True)
class TracedFunction:
    """A function Dynamo will trace: where it is and why mend thinks so."""

    path: str
    qualname: str
    line: int
    end_line: int
    reason: str  # "compiled", "module-forward", "entry-point", "called from <qualname>"
    root: bool


class Project:
    """Summaries of the checked files plus the traced-function closure over them."""

    def __init__(self, summaries: list[FileSummary], regions: str = "modules", entry_points: tuple[str, ...] = (),
                 loader: Callable[[str, str], FileSummary | None] | None = None,
                 expand: Callable[[FileSummary], None] | None = None) -> None:
        """``loader(module, near)``: the summary of a module not given (None: none); ``expand(summary)``:
        parse, in place, a file the pre-filter skipped once traced code refers to it (None: left as it is)."""
        self.summaries: dict[str, FileSummary] = {s.path: s for s in summaries}
        self.by_module: dict[str, list[FileSummary]] = {}
        for s in summaries:
            self.by_module.setdefault(s.module, []).append(s)
        self.regions = regions
        self.entry_points = entry_points
        self.loader = loader
        self.expand = expand
        self._missing: set[str] = set()
        self.traced: dict[str, dict[str, TracedFunction]] = {}
        self._module_cache: dict[tuple[str, str], bool] = {}
        self._break_memo: dict[tuple[str, str], tuple[str, int, str] | None] = {}
        self._by_func: dict[str, dict[str, list[Finding]]] = {}
        self._compute()

    # -- lookup -------------------------------------------------------------------------------
    def _module(self, name: str, near: str | None) -> FileSummary | None:
        cands = self.by_module.get(name)
        if not cands and self.loader is not None and name not in self._missing and name:
            s = self.loader(name, near or "")
            if s is None:
                self._missing.add(name)
            else:
                self.by_module.setdefault(name, []).append(s)
                cands = self.by_module[name]
        if not cands:
            return None
        for c in cands:
            if c.skipped and self.expand is not None:
                self.expand(c)
        if len(cands) > 1 and near:
            d = str(Path(near).parent)
            for c in cands:
                if str(Path(c.path).parent) == d:
                    return c
        return cands[0]

    def resolve(self, q: str, near: str | None = None, depth: int = 0) -> tuple[FileSummary, str, str] | None:
        """``(summary, "func"|"class", id)`` for a dotted name defined in the tree."""
        if depth > 6 or not q or q.startswith(("torch.", "builtins.")):
            return None
        parts = q.split(".")
        for i in range(len(parts), 0, -1):
            s = self._module(".".join(parts[:i]), near)
            if s is None:
                continue
            rest = parts[i:]
            if not rest:
                return None
            name = ".".join(rest)
            if name in s.functions:
                return (s, "func", name)
            if name in s.classes:
                return (s, "class", name)
            # nested class/method ids ("Outer.Inner.method") or re-exports ("from .x import Y")
            head = rest[0]
            if head in s.imports:
                target = s.imports[head] + ("." + ".".join(rest[1:]) if rest[1:] else "")
                return self.resolve(target, s.path, depth + 1)
            return None
        return None

    def method(self, s: FileSummary, cls: str, name: str, depth: int = 0) -> tuple[FileSummary, FuncInfo] | None:
        if depth > 10:
            return None
        info = s.classes.get(cls)
        if info is None:
            return None
        fid = info.methods.get(name)
        if fid is not None:
            return (s, s.functions[fid])
        for base in info.bases:
            r = self._class_ref(base, s)
            if r is not None:
                m = self.method(r[0], r[1], name, depth + 1)
                if m is not None:
                    return m
        return None

    def _class_ref(self, q: str, near: FileSummary) -> tuple[FileSummary, str] | None:
        r = self.resolve(q, near.path)
        if r is not None and r[1] == "class":
            return (r[0], r[2])
        return None

    def is_module_class(self, s: FileSummary, cls: str, depth: int = 0) -> bool:
        key = (s.path, cls)
        if key in self._module_cache:
            return self._module_cache[key]
        self._module_cache[key] = False
        info = s.classes[cls]
        result = False
        external_base = False
        for base in info.bases:
            if base in MODULE_BASES or (base.startswith("torch.nn.") and base.rsplit(".", 1)[-1][:1].isupper()
                                        and base not in NOT_MODULES):
                result = True
                break
            r = self._class_ref(base, s) if depth < 10 else None
            if r is not None:
                if self.is_module_class(r[0], r[1], depth + 1):
                    result = True
                    break
                external_base = external_base or self._reaches_outside(r[0], r[1], depth + 1)
            elif _outside(base):
                external_base = True
        if not result and external_base and "forward" in info.methods:
            result = True
        self._module_cache[key] = result
        return result

    def _reaches_outside(self, s: FileSummary, cls: str, depth: int) -> bool:
        """A base of ``cls`` (or of its bases in the tree) is defined outside the checked tree: transformers'
        ``XPreTrainedModel(PreTrainedModel)`` when ``modeling_utils`` is not among the files checked."""
        for base in s.classes[cls].bases:
            r = self._class_ref(base, s) if depth < 10 else None
            if r is None and _outside(base) or r is not None and self._reaches_outside(r[0], r[1], depth + 1):
                return True
        return False

    def resolve_ref(self, ref: Ref, s: FileSummary, fn: FuncInfo | None,
                    construct: bool = False) -> list[tuple[FileSummary, FuncInfo]]:
        """The functions ``ref`` may call. With ``construct`` (``ref`` is the callee of a call), calling
        an ``nn.Module`` class of the tree runs its ``__init__``, which Dynamo traces."""
        resolve = _REF_KINDS.get(ref[0])
        return resolve(self, ref, s, fn, construct) if resolve is not None else []

    def _qual_ref(self, ref: Ref, s: FileSummary, fn: FuncInfo | None, construct: bool) -> list:
        """``("qual", "pkg.mod.f")``: a function of the tree, or the ``__init__`` of a class of the tree called
        (Dynamo traces a user class's constructor inline: an output class whose ``__init__`` warns breaks the
        graph of the ``forward`` that returns it)."""
        r = self.resolve(ref[1], s.path)
        if r is not None and r[1] == "func":
            return [(r[0], r[0].functions[r[2]])]
        if construct and r is not None and r[1] == "class":
            return self._found(self.method(r[0], r[2], "__init__"))
        return []

    def _self_ref(self, ref: Ref, s: FileSummary, fn: FuncInfo | None, construct: bool) -> list:
        """``("self", "method")``: a method of the owning class (through its bases)."""
        cls = _owner_class(s, fn)
        return self._found(self.method(s, cls, ref[1])) if cls else []

    def _super_ref(self, ref: Ref, s: FileSummary, fn: FuncInfo | None, construct: bool) -> list:
        """``("super", "method")``: the method of the first base that has it."""
        cls = _owner_class(s, fn)
        if not cls:
            return []
        for base in s.classes[cls].bases:
            r = self._class_ref(base, s)
            m = self.method(r[0], r[1], ref[1]) if r is not None else None
            if m:
                return [m]
        return []

    def _selfattr_ref(self, ref: Ref, s: FileSummary, fn: FuncInfo | None, construct: bool) -> list:
        """``("selfattr", "attr")``: ``forward`` of the classes assigned to ``self.attr``."""
        cls = _owner_class(s, fn)
        return self._methods_of(self._attr_classes(s, cls, ref[1]), s, "forward") if cls else []

    def _selfattrm_ref(self, ref: Ref, s: FileSummary, fn: FuncInfo | None, construct: bool) -> list:
        """``("selfattrm", "attr", "method")``: ``self.encoder.set_attention_type(...)``, ``layer.reset()``
        over ``self.layers``."""
        cls = _owner_class(s, fn)
        if not cls or len(ref) != 3:
            return []
        return self._methods_of(self._attr_classes(s, cls, ref[1]), s, ref[2])

    def _instance_ref(self, ref: Ref, s: FileSummary, fn: FuncInfo | None, construct: bool) -> list:
        """``("instance", "pkg.mod.Class")``: the ``forward`` of the class."""
        return self._methods_of((ref[1],), s, "forward")

    def _ret_ref(self, ref: Ref, s: FileSummary, fn: FuncInfo | None, construct: bool) -> list:
        """``("ret", "pkg.mod.f", "0")``: what element 0 of ``f``'s returned tuples refers to."""
        r = self.resolve(ref[1], s.path)
        if r is None or r[1] != "func":
            return []
        rs, rfn = r[0], r[0].functions[r[2]]
        idx = int(ref[2])
        out: list[tuple[FileSummary, FuncInfo]] = []
        for ret in rfn.returns:
            if idx < len(ret) and ret[idx] is not None:
                out.extend(self.resolve_ref(ret[idx], rs, rfn))
        return out

    def _methods_of(self, classes: tuple[str, ...], s: FileSummary, name: str) -> list:
        """Method ``name`` of each of ``classes`` (dotted names seen from ``s``) that has one."""
        out = []
        for q in classes:
            r = self._class_ref(q, s)
            m = self.method(r[0], r[1], name) if r is not None else None
            if m:
                out.append(m)
        return out

    @staticmethod
    def _found(m: tuple[FileSummary, FuncInfo] | None) -> list:
        return [m] if m else []

    def _attr_classes(self, s: FileSummary, cls: str, attr: str, depth: int = 0) -> tuple[str, ...]:
        info = s.classes.get(cls)
        if info is None or depth > 10:
            return ()
        if attr in info.attr_classes:
            return info.attr_classes[attr]
        for base in info.bases:
            r = self._class_ref(base, s)
            if r is not None:
                found = self._attr_classes(r[0], r[1], attr, depth + 1)
                if found:
                    return found
        return ()

    # -- closure ------------------------------------------------------------------------------
    def _compute(self) -> None:
        work = self._roots()
        work.reverse()  # roots in discovery order; roots keep their own reason even when also called
        for s, fn, reason, _root in list(work):
            if not fn.opaque:
                self.traced.setdefault(s.path, {}).setdefault(
                    fn.id, TracedFunction(s.path, fn.id, fn.line, fn.end_line, reason, True))
        self._close(work)

    def _roots(self) -> list[tuple[FileSummary, FuncInfo, str, bool]]:
        """Compiled functions and objects, module forwards (``regions = "modules"``), entry points."""
        work: list[tuple[FileSummary, FuncInfo, str, bool]] = []
        for s in list(self.summaries.values()):
            work += [(s, fn, "compiled", True) for fn in s.functions.values() if fn.compiled]
            for site in s.compile_sites:
                if site.target is None or site.kind == "decorator":
                    continue
                ctx = s.functions.get(site.func) if site.func else None
                work += [(ts, tf, "compiled", True) for ts, tf in self.resolve_ref(site.target, s, ctx)]
            if self.regions == "modules":
                for cid, c in s.classes.items():
                    fid = c.methods.get("forward")
                    if fid and self.is_module_class(s, cid):
                        work.append((s, s.functions[fid], "module-forward", True))
        for ep in self.entry_points:
            r = self.resolve(ep.replace(":", "."))
            if r is not None and r[1] == "func":
                work.append((r[0], r[0].functions[r[2]], "entry-point", True))
            elif r is not None and r[1] == "class":
                m = self.method(r[0], r[2], "forward")
                if m:
                    work.append((m[0], m[1], "entry-point", True))
        return work

    def _close(self, work: list[tuple[FileSummary, FuncInfo, str, bool]]) -> None:
        """Everything reachable from ``work`` through calls is traced too (opaque functions are not:
        disabled, or reordered after the graph)."""
        seen: set[tuple[str, str]] = set()
        while work:
            s, fn, reason, root = work.pop()
            if (s.path, fn.id) in seen:
                continue
            seen.add((s.path, fn.id))
            if fn.opaque:
                continue
            traced = self.traced.setdefault(s.path, {})
            traced.setdefault(fn.id, TracedFunction(s.path, fn.id, fn.line, fn.end_line, reason, root))
            for site in fn.calls:
                for ts, tf in self.resolve_ref(site.ref, s, fn, construct=True):
                    if not tf.opaque and (ts.path, tf.id) not in seen:
                        work.append((ts, tf, f"called from {fn.id}", False))

    # -- queries ----------------------------------------------------------------------------
    def is_traced(self, path: str, func: str) -> bool:
        return func in self.traced.get(path, {})

    def traced_functions(self, path: str) -> list[TracedFunction]:
        return sorted(self.traced.get(path, {}).values(), key=lambda t: t.line)

    def compile_boundaries(self, path: str) -> list[CompileSite]:
        s = self.summaries.get(path)
        return sorted(s.compile_sites, key=lambda c: (c.line, c.col)) if s else []

    def function_at(self, path: str, line: int) -> TracedFunction | None:
        """The innermost traced function containing ``line`` (None when that code is not traced)."""
        best = None
        for t in self.traced.get(path, {}).values():
            if t.line <= line <= t.end_line and (best is None or t.line >= best.line):
                best = t
        return best

    def disabled_calls(self, s: FileSummary, fn: FuncInfo) -> list:
        out = []
        for site in fn.calls:
            for ts, tf in self.resolve_ref(site.ref, s, fn, construct=True):
                if tf.breaks_when_called:
                    out.append((site, tf))
                    break
        return out

    def findings_of(self, s: FileSummary, fid: str) -> list[Finding]:
        """The findings recorded in function ``fid`` of ``s`` (indexed once per file)."""
        table = self._by_func.get(s.path)
        if table is None:
            table = self._by_func[s.path] = {}
            for f in s.findings:
                if f.func:
                    table.setdefault(f.func, []).append(f)
        return table.get(fid, [])

    def first_break(self, s: FileSummary, fn: FuncInfo, depth: int = 0) -> tuple[str, int, str] | None:
        """Where ``fn`` breaks the graph when traced: ``(path, line, code)`` of its first break, directly
        or in a function it calls (transitively), or ``None``."""
        key = (s.path, fn.id)
        if key in self._break_memo:
            return self._break_memo[key]
        self._break_memo[key] = None  # cycle guard
        result = None
        for f in self.findings_of(s, fn.id):
            if s.suppressions.suppressed(f.code, f.line):  # marked as known not to break (a helper's guarded line)
                continue
            if RULES[f.code].kind in ("break", "frame-skip") and "mode" not in f.data and all(
                    self.ref_is(ref, what, s, fn) for what, ref in f.requires):
                result = (s.path.removeprefix("<dependency>"), f.line, f.code)
                break
        if result is None and depth < 50:
            for site in fn.calls:
                for ts, tf in self.resolve_ref(site.ref, s, fn, construct=True):
                    if tf.reorderable or (tf.disabled and s.suppressions.suppressed("MND504", site.line)):
                        continue  # a disabled call marked as known (a helper's fallback for what a graph cannot carry)
                    r = (s.path.removeprefix("<dependency>"), site.line, "MND504") if tf.disabled else \
                        self.first_break(ts, tf, depth + 1)
                    if r is not None:
                        result = r
                        break
                if result is not None:
                    break
        self._break_memo[key] = result
        return result

    def ref_is(self, refstr: str, what: str, s: FileSummary, fn: FuncInfo | None) -> bool:
        ref = tuple(refstr.split("|"))
        for _ts, tf in self.resolve_ref(ref, s, fn):
            if what == "disabled" and tf.disabled:
                return True
            if what == "contextmanager" and tf.contextmanager:
                return True
        return False


def _owner_class(s: FileSummary, fn: FuncInfo | None) -> str | None:
    while fn is not None:
        if fn.cls:
            return fn.cls
        fn = s.functions.get(fn.parent) if fn.parent else None
    return None


_REF_KINDS = {
    "qual": Project._qual_ref,
    "self": Project._self_ref,
    "super": Project._super_ref,
    "selfattr": Project._selfattr_ref,
    "selfattrm": Project._selfattrm_ref,
    "instance": Project._instance_ref,
    "ret": Project._ret_ref,
}
