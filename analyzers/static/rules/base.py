"""Rule metadata and the rule registry.

A rule is declarative, in the spirit of Fixit: a :class:`Rule` carries its code, kebab-case name,
message, the Dynamo graph-break registry ids it predicts, severity, its documentation sections and
embedded VALID / INVALID examples (which double as tests and as the documentation's example). The
detection logic lives in plain checker functions registered with :func:`checker`; the engine calls
every checker for one node kind from a single walk over each function (one parse, one pass).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field

from mend.analyzers.diagnostic import Severity

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
#   "meta": about the file itself (syntax error, unreadable).
KINDS = ("break", "frame-skip", "recompile", "meta")


def _dedent(text: str) -> str:
    """Dedent an example; a header of unindented lines (shared imports) may precede an indented body."""
    head, sep, body = text.partition("\n\n")
    if sep and head.strip() and all(not line[:1].isspace() for line in head.splitlines() if line):
        return (head.strip("\n") + "\n\n" + textwrap.dedent(body).strip("\n")).strip("\n")
    return textwrap.dedent(text).strip("\n")


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

    def __post_init__(self) -> None:
        assert self.kind in KINDS, self.kind
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


RULES: dict[str, Rule] = {}

# node kind -> list of checker functions (see visitor.Context for the signature)
CHECKERS: dict[str, list[Callable[..., None]]] = {}


def register(*rules: Rule) -> None:
    for rule in rules:
        if rule.code in RULES:
            raise ValueError(f"duplicate rule code {rule.code}")
        RULES[rule.code] = rule


def checker(kind: str) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """Register a checker for a node kind: ``call``, ``if``, ``while``, ``ifexp``, ``subscript``,
    ``fstring``, ``augassign``, ``assign``, ``with``, ``binop``."""

    def deco(fn: Callable[..., None]) -> Callable[..., None]:
        CHECKERS.setdefault(kind, []).append(fn)
        return fn

    return deco


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
