"""What a rule's checker may read, and how it reports: the contract between the rules and the walk.

Four levels, one per kind of hook (:mod:`mend.analyzers.static.rules.base`):

* :class:`Context`, for node checkers (``@checker("call")``: ``fn(ctx, node)``) and function checkers
  (``@function_checker``: ``fn(ctx)``, after the body was walked): one function being walked, with
  its names resolved, light tensor kinds (:mod:`mend.analyzers.static.tensors`), what its class
  assigns to ``self``, and :meth:`Context.report`. ``mend.analyzers.static.walker.FunctionWalker``
  implements it.
* :class:`FileContext`, for file checkers (``@file_checker``: ``fn(file)``): one parsed module and its
  scopes of driver code (where compiled objects are created and called).
  ``mend.analyzers.static.module.ModuleAnalyzer`` implements it.
* :class:`ProjectContext`, for project checkers (``@project_checker``: ``fn(project, summary, func)``
  returning findings): the project index once it knows which functions are traced.
  ``mend.analyzers.static.regions.Project`` implements it.

A checker reports through its context (or returns :class:`Finding` values, for project checkers); it
never edits the summary or the walker's state directly.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import Protocol

from mend.analyzers.static.names import Scope
from mend.analyzers.static.source import LineIndex
from mend.analyzers.static.summary import CallSite, FileSummary, Finding, FuncInfo, Ref

Span = tuple[int, int, int, int]  # line, col (1-based characters), end_line, end_col
FunctionNode = ast.FunctionDef | ast.AsyncFunctionDef


class ClassFacts:
    """What the methods of one class assign to ``self``: tensors, submodules, ints, loggers, locks."""

    __slots__ = ("tensor_attrs", "module_attrs", "int_attrs", "logger_attrs", "lock_attrs", "rnn_attrs",
                 "attr_classes")

    def __init__(self) -> None:
        self.tensor_attrs: set[str] = set()
        self.module_attrs: set[str] = set()
        self.int_attrs: set[str] = set()
        self.logger_attrs: set[str] = set()
        self.lock_attrs: set[str] = set()
        self.rnn_attrs: set[str] = set()  # torch.nn.LSTM / GRU / RNN submodules (RNN_MODULES)
        self.attr_classes: dict[str, set[str]] = {}  # self.attr -> classes of the tree assigned to it


@dataclass(slots=True)
class Region:
    """A ``try``, loop or user-``@contextmanager`` ``with`` statement walked in a function.

    ``findings[start:end]`` of the function are the ones inside its body; ``requires`` are the project
    conditions under which it matters (``("contextmanager", ref)``: the ``with`` target must be a
    ``@contextmanager`` function of the tree)."""

    kind: str  # "try" | "loop" | "ctx"
    node: ast.stmt
    start: int
    end: int
    requires: tuple[tuple[str, str], ...] = ()


class Context(Protocol):
    """One function being walked, as node and function checkers see it."""

    info: FuncInfo  # the function: id, name, owning class (``info.cls``), decorators
    node: FunctionNode
    cls: str | None  # the owning class id, for methods
    facts: ClassFacts | None  # what the owning class assigns to ``self``
    config_flags: frozenset[str]  # Dynamo config flags switched on for this function (file or decorator)
    local_values: dict[str, object]  # name -> last value assigned (an expression, or (call, index) unpacked)
    ptr_names: set[str]  # names holding ``data_ptr()``/``id()`` values
    findings: list[Finding]  # the findings of this function so far
    regions: list[Region]  # the try/loop/with regions walked so far

    def qualify(self, expr: ast.AST) -> str | None:
        """Dotted name of a Name/Attribute chain (``F.relu`` -> ``torch.nn.functional.relu``), or None."""

    def kind(self, expr: ast.AST) -> int:
        """Tensor kind of ``expr``: ``tensors.T`` / ``M`` (maybe) / ``S`` (number from data) / ``N``."""

    def element_kind(self, expr: ast.AST) -> int:
        """``tensors.T`` for a list comprehension (or a name bound to one) of tensors, else ``tensors.N``."""

    def is_self_attr(self, expr: ast.AST) -> str | None:
        """``attr`` for ``self.attr`` (the method's first parameter), else None."""

    def is_logger(self, expr: ast.AST) -> bool:
        """``expr`` is a ``logging.Logger`` (module-level, ``self.logger``, or ``getLogger(...)``)."""

    def is_lock(self, expr: ast.AST) -> bool:
        """``expr`` is a ``threading`` lock."""

    def is_bool_tensor(self, expr: ast.AST) -> bool:
        """``expr`` is a boolean tensor (a mask)."""

    def name_mode(self, expr: ast.AST) -> str | None:
        """The mode of a name in ``expr`` that holds a tensor only in that mode (assigned under ``if
        self.training:``), else None."""

    def python_draw(self, expr: ast.AST) -> str | None:
        """The Python ``random`` function Dynamo traces (``random.uniform``) that ``expr`` is a draw of,
        or that a comparison in ``expr`` reads (through locals); else None."""

    def mode_prefixed(self, test: ast.AST) -> str | None:
        """For ``a and b and <tensor condition>``: the mode test that guards the tensor condition."""

    def resumed_input(self, expr: ast.AST) -> bool:
        """``expr`` is a name bound before an earlier graph break of this function (an input of the
        frame Dynamo resumes in)."""

    def in_with_item(self, call: ast.Call) -> bool:
        """``call`` is the context expression of a ``with`` statement."""

    def span(self, node: ast.AST) -> Span:
        """``node``'s position in characters."""

    def report(self, code: str, node: ast.AST, message: str | None = None,
               requires: tuple[tuple[str, str], ...] = (), **data: object) -> None:
        """Record a finding of ``code`` at ``node`` (message: the rule's summary by default). Under an
        ``if self.training:``-style mode guard the mode is added to the message and ``data["mode"]``."""


@dataclass(slots=True)
class DriverScope:
    """One scope of driver code: the module body, or a function that mentions ``compile``.

    ``nodes`` are the scope's nodes (not descending into nested functions or classes), each with the
    loops around it; ``local_values`` the last value assigned to each name of the scope."""

    body: list[ast.stmt]
    scope: Scope
    info: FuncInfo | None  # None: module level
    self_name: str | None
    node: FunctionNode | None
    nodes: list[tuple[ast.AST, tuple[ast.stmt, ...]]] = field(default_factory=list)
    local_values: dict[str, object] = field(default_factory=dict)


class FileContext(Protocol):
    """One parsed module, as file checkers see it (after every function was walked)."""

    tree: ast.Module
    source: str
    module: str  # dotted module name
    scope: Scope  # module-level names
    index: LineIndex
    summary: FileSummary  # functions (with the calls the walk recorded), classes, compile sites
    has_compile: bool  # the text mentions ``compile``
    func_nodes: list[tuple[FuncInfo, FunctionNode, Scope, dict]]

    def driver_scopes(self) -> list[DriverScope]:
        """The module body and every function that mentions ``compile`` (computed once)."""

    def span(self, node: ast.AST) -> Span:
        """``node``'s position in characters."""

    def report(self, code: str, node: ast.AST, scope: str | None, message: str) -> None:
        """Record a finding of driver code (kept whether or not its scope is traced); ``scope`` is the
        id of the function holding it (None at module level)."""


class ProjectContext(Protocol):
    """The project index, as project checkers see it."""

    def resolve_ref(self, ref: Ref, s: FileSummary, fn: FuncInfo | None,
                    construct: bool = False) -> list[tuple[FileSummary, FuncInfo]]:
        """The functions a call reference may reach (``construct``: calling a module class runs ``__init__``)."""

    def disabled_calls(self, s: FileSummary, fn: FuncInfo) -> list[tuple[CallSite, FuncInfo]]:
        """Calls in ``fn`` to ``@torch.compiler.disable`` functions of the tree."""

    def first_break(self, s: FileSummary, fn: FuncInfo) -> tuple[str, int, str] | None:
        """``(path, line, code)`` of the first break ``fn`` reaches when traced, directly or through calls."""

    def findings_of(self, s: FileSummary, fid: str) -> list[Finding]:
        """The findings recorded in function ``fid`` of ``s``."""

    def ref_is(self, refstr: str, what: str, s: FileSummary, fn: FuncInfo | None) -> bool:
        """The reference (``"qual|pkg.mod.f"``) resolves to a function that is ``what`` (``disabled``,
        ``contextmanager``)."""

