"""The rule registry: every rule's metadata, and the hooks through which rules see the code.

A rule is declarative, in the spirit of Fixit and ruff: a :class:`Rule` carries its code, kebab-case
name, message, the Dynamo graph-break registry ids it predicts, severity, its documentation sections,
embedded VALID / INVALID examples (which double as tests and as the documentation's example), and
whether ``mend fix`` repairs it (:class:`FixInfo`: availability, applicability, the fix's safety notes).
``mend check``, ``mend rule``, ``mend fix``, ``mend report`` and ``docs/rules/`` all read this one
registry. A fixable rule names its repair strategies in order (``FixInfo(strategies=...)``); the strategies
themselves (LibCST code, ``mend.rewriter.strategies``) are found by those names, and the rule metadata
never imports them, so ``mend check`` stays free of LibCST.

Detection logic lives in plain checker functions registered at four levels (see
:mod:`mend.analyzers.static.rules.context` for what each may read):

* :func:`checker` ``(kind)``: a node of one kind in a function body, during the single walk;
* :func:`function_checker`: a function, after its body was walked (its findings and regions);
* :func:`file_checker`: a file, after all its functions (driver code of compiled objects);
* :func:`project_checker`: a traced function, once the project index knows what is traced.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mend.analyzers.diagnostic import Severity
from mend.analyzers.static.summary import Finding

if TYPE_CHECKING:
    from mend.analyzers.static.rules.context import Context, FileContext, ProjectContext
    from mend.analyzers.static.summary import FileSummary, FuncInfo

__all__ = [
    "CHECKERS", "FILE_CHECKERS", "FUNCTION_CHECKERS", "PROJECT_CHECKERS", "RULES", "RUNTIME_RULES", "Finding",
    "FixInfo", "Rule", "checker", "file_checker", "fix_info", "function_checker", "project_checker", "register",
    "rule_for",
]

NodeChecker = Callable[["Context", Any], None]
FunctionChecker = Callable[["Context"], None]
FileChecker = Callable[["FileContext"], None]
ProjectChecker = Callable[["ProjectContext", "FileSummary", "FuncInfo"], Iterable[Finding]]

GB_URL = "https://meta-pytorch.github.io/compile-graph-break-site/gb/{}.html"

CATEGORIES = {
    "1": "side effects",
    "2": "data-dependent control flow",
    "3": "scalars and dynamic shapes",
    "4": "recompile triggers",
    "5": "unsupported calls and whole-frame skips",
    "9": "mend's own diagnostics",
}

# How a rule shows up at runtime, used by the documentation and by the honesty tests:
#   "break": Dynamo logs a graph break at the reported line;
#   "frame-skip": a break inside the reported statement makes Dynamo skip the whole frame;
#   "recompile": the reported code makes Dynamo compile the frame again;
#   "meta": about the file itself (syntax error, unreadable);
#   "runtime": found only by ``mend run`` (a recorded break or recompile no rule predicts).
KINDS = ("break", "frame-skip", "recompile", "meta", "runtime")
AVAILABILITY = ("always", "sometimes")
APPLICABILITY = ("safe", "unsafe")


def _dedent(text: str) -> str:
    """Dedent an example; a header of unindented lines (shared imports) may precede an indented body."""
    head, sep, body = text.partition("\n\n")
    if sep and head.strip() and all(not line[:1].isspace() for line in head.splitlines() if line):
        return (head.strip("\n") + "\n\n" + textwrap.dedent(body).strip("\n")).strip("\n")
    return textwrap.dedent(text).strip("\n")


@dataclass(frozen=True)
class FixInfo:
    """What ``mend fix`` does for a rule.

    ``availability``: whether every finding gets a fix (``always``) or only those whose safety
    conditions the fix can prove (``sometimes``); ``applicability``: the class of the fix in its most
    common form (``safe`` fixes are applied by ``mend fix``, ``unsafe`` ones need ``--unsafe-fixes``);
    ``summary``: one line (the ``[*]`` help of ``mend check --output-format full``); ``safety_doc``
    (markdown): what the fix changes and when it declines (``mend rule CODE``, "Fix safety");
    ``strategies``: the repair strategies ``mend fix`` tries for a finding, in order (modules of
    ``mend.rewriter.strategies``; the first that returns a plan repairs the site)."""

    availability: str
    applicability: str
    summary: str
    safety_doc: str
    strategies: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        assert self.availability in AVAILABILITY, self.availability
        assert self.applicability in APPLICABILITY, self.applicability
        assert self.strategies and all(s.isidentifier() for s in self.strategies), self.strategies


@dataclass(frozen=True)
class Rule:
    code: str
    name: str
    summary: str  # one line, also the default message
    registry_ids: tuple[str, ...]
    kind: str
    what: str
    why: str
    use_instead: str = ""
    severity: Severity = Severity.ERROR
    invalid: tuple[str, ...] = ()
    valid: tuple[str, ...] = ()
    references: tuple[str, ...] = ()
    fix: FixInfo | None = None  # None: mend fix has no repair for this rule
    no_fix: str = ""  # why not, when there is more to say than "no automatic fix for this rule"

    def __post_init__(self) -> None:
        assert self.kind in KINDS, self.kind
        assert not (self.fix and self.no_fix), self.code
        object.__setattr__(self, "invalid", tuple(_dedent(s) for s in self.invalid))
        object.__setattr__(self, "valid", tuple(_dedent(s) for s in self.valid))
        object.__setattr__(self, "what", _dedent(self.what))
        object.__setattr__(self, "why", _dedent(self.why))
        object.__setattr__(self, "use_instead", _dedent(self.use_instead))

    @property
    def category(self) -> str:
        return CATEGORIES[self.code[3]]

    @property
    def example(self) -> str:
        return self.invalid[0] if self.invalid else ""

    @property
    def all_references(self) -> tuple[str, ...]:
        gb = tuple(GB_URL.format(r.lower()) for r in self.registry_ids if r.startswith("GB"))
        return gb + self.references

    def to_dict(self) -> dict[str, object]:
        return {
            "code": self.code,
            "name": self.name,
            "summary": self.summary,
            "category": self.category,
            "kind": self.kind,
            "severity": self.severity.value,
            "registry_ids": list(self.registry_ids),
            "what": self.what,
            "why": self.why,
            "example": self.example,
            "use_instead": self.use_instead,
            "references": list(self.all_references),
        }


RULES: dict[str, Rule] = {}  # what `mend check` can report
RUNTIME_RULES: dict[str, Rule] = {}  # what only `mend run` reports (kind "runtime")

NODE_KINDS = ("call", "if", "while", "ifexp", "subscript", "fstring", "augassign", "assign", "with", "binop",
              "assert", "compfilter")  # compfilter: a comprehension's `if` (the test expression)
CHECKERS: dict[str, list[NodeChecker]] = {kind: [] for kind in NODE_KINDS}
FUNCTION_CHECKERS: list[FunctionChecker] = []
FILE_CHECKERS: list[FileChecker] = []
PROJECT_CHECKERS: list[ProjectChecker] = []


def register(*rules: Rule) -> None:
    for rule in rules:
        if rule.code in RULES or rule.code in RUNTIME_RULES:
            raise ValueError(f"duplicate rule code {rule.code}")
        (RUNTIME_RULES if rule.kind == "runtime" else RULES)[rule.code] = rule


def rule_for(code: str) -> Rule | None:
    """The rule of a code, whichever part of mend reports it."""
    return RULES.get(code) or RUNTIME_RULES.get(code)


def fix_info(code: str) -> FixInfo | None:
    """What ``mend fix`` does for ``code``, or None when it has no repair."""
    rule = RULES.get(code)
    return rule.fix if rule is not None else None


def checker(kind: str) -> Callable[[NodeChecker], NodeChecker]:
    """Register ``fn(ctx, node)`` for every node of ``kind`` (one of :data:`NODE_KINDS`) in a function body."""
    if kind not in CHECKERS:
        raise ValueError(f"unknown node kind {kind!r}; one of {', '.join(NODE_KINDS)}")

    def deco(fn: NodeChecker) -> NodeChecker:
        CHECKERS[kind].append(fn)
        return fn

    return deco


def function_checker(fn: FunctionChecker) -> FunctionChecker:
    """Register ``fn(ctx)``, run once per function after its body was walked."""
    FUNCTION_CHECKERS.append(fn)
    return fn


def file_checker(fn: FileChecker) -> FileChecker:
    """Register ``fn(file)``, run once per file after all its functions were walked."""
    FILE_CHECKERS.append(fn)
    return fn


def project_checker(fn: ProjectChecker) -> ProjectChecker:
    """Register ``fn(project, summary, func) -> findings``, run for every traced function."""
    PROJECT_CHECKERS.append(fn)
    return fn
