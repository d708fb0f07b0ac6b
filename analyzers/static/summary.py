"""What one file tells the project index: functions, classes, compile sites and candidate findings.

A :class:`FileSummary` is the cacheable result of the single pass over one file. It holds only
plain data (strings, ints, tuples, dicts), so it travels quickly to and from the worker processes of
``-j`` and is stored as JSON in the result cache (:mod:`mend.analyzers.static.datacodec`). Call references are symbolic (``("qual", "pkg.mod.fn")``,
``("self", "method")``, ...) and are resolved across files by :mod:`mend.analyzers.static.regions`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from mend.analyzers.static.source import Suppressions

# A reference to something callable, resolved in the project index:
#   ("qual", "pkg.mod.name")        a module-level function/class (or re-export) by dotted name
#   ("self", "method")              self.method(...) inside a class (MRO over bases in the tree)
#   ("selfattr", "attr")            self.attr(...): forward of the classes assigned to self.attr
#   ("super", "method")             super().method(...)
#   ("instance", "pkg.mod.Class")   an instance of a class: its forward is what torch.compile traces
#   ("ret", "pkg.mod.fn", "0")      element 0 of what fn returns (harness-style tuples)
Ref = tuple[str, ...]


@dataclass(slots=True)
class Finding:
    """A rule match before filtering: the engine keeps it if its function is traced and its
    ``requires`` conditions hold in the project index."""

    code: str
    message: str
    line: int
    col: int  # 1-based character column
    end_line: int
    end_col: int
    func: str | None  # function id the finding is in (None: module-level driver code)
    requires: tuple[tuple[str, str], ...] = ()
    data: dict[str, object] = field(default_factory=dict)


@dataclass(slots=True)
class CallSite:
    ref: Ref
    line: int
    col: int
    end_line: int
    end_col: int
    in_loop: bool = False
    # the arguments that are certainly tensors: positional indices and keyword names (tensor flow into
    # the callee's parameters, resolved inside the file by ModuleAnalyzer)
    tensor_args: tuple[int | str, ...] = ()
    # the arguments that are certainly Python values (literals, shapes, sizes): such a parameter is not
    # taken for a tensor by the ``forward`` heuristic
    static_args: tuple[int | str, ...] = ()


@dataclass(slots=True)
class FuncInfo:
    id: str  # "forward" | "Block.forward" | "outer.<locals>.inner"
    name: str
    line: int
    end_line: int
    cls: str | None = None  # owning class id, for methods
    compiled: bool = False  # decorated with torch.compile (a root)
    compile_line: int = 0  # where that decorator is
    disabled: bool = False  # @torch.compiler.disable / @torch._dynamo.disable
    # registered with torch._dynamo.config.reorderable_logging_functions (Dynamo runs the call after the
    # graph), or mend's reporting helper (an operator of the graph): a call of it does not break the graph
    reorderable: bool = False
    contextmanager: bool = False  # @contextlib.contextmanager
    parent: str | None = None  # enclosing function id for nested functions
    calls: list[CallSite] = field(default_factory=list)

    @property
    def opaque(self) -> bool:
        """Dynamo does not trace into a call of this function."""
        return self.disabled or self.reorderable

    @property
    def breaks_when_called(self) -> bool:
        """A call from compiled code ends the graph (MND504)."""
        return self.disabled and not self.reorderable
    returns: list[tuple[Ref | None, ...]] = field(default_factory=list)
    # try/loop/with-contextmanager statements: (kind, line, col, body_start, body_end, requires)
    regions: list[tuple] = field(default_factory=list)


@dataclass(slots=True)
class ClassInfo:
    id: str
    line: int
    bases: tuple[str, ...]  # dotted names of the bases, as written (resolved through imports)
    methods: dict[str, str] = field(default_factory=dict)  # name -> function id
    attr_classes: dict[str, tuple[str, ...]] = field(default_factory=dict)  # self.attr -> classes


@dataclass(slots=True)
class CompileSite:
    """A compile boundary: a ``torch.compile`` decorator or call (what it wraps, if known)."""

    line: int
    col: int
    kind: str  # "decorator" | "call" | "method"
    target: Ref | None
    func: str | None  # the function the site is in (None: module level)


@dataclass(slots=True)
class FileSummary:
    path: str
    module: str
    is_package: bool
    imports: dict[str, str] = field(default_factory=dict)  # module-level name -> dotted name
    functions: dict[str, FuncInfo] = field(default_factory=dict)
    classes: dict[str, ClassInfo] = field(default_factory=dict)
    compile_sites: list[CompileSite] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    suppressions: Suppressions = field(default_factory=Suppressions)
    lines: int = 0
    skipped: bool = False  # pre-filter: the file cannot contain traced code on its own
    timed_out: float = 0.0  # the time limit (seconds) its analysis ran past: then its one finding is MND902
