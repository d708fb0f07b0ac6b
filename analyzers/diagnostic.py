"""The one currency between mend's analyzers, rewriter and CLI.

A :class:`Diagnostic` says *what* is wrong *where*: a rule code (``MND101``), a message, a path and a
1-based line/column range. Static findings and runtime records use the same type, so a recorded break at
``model.py:41`` can be matched to the static rule (and its fix) for that line.

Positions follow ruff's contract: lines and columns are **1-based**; ``end_line``/``end_col`` point one
past the last character of the range (exclusive end column, like ruff and SARIF).
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any


class Severity(str, enum.Enum):
    """How bad a finding is. Graph breaks are errors; recompile risks are warnings."""

    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


class Applicability(str, enum.Enum):
    """Fix safety, in ruff's terms.

    * ``SAFE``: keeps what the program computes and its eager behaviour; applied by ``mend fix``.
    * ``UNSAFE``: valid code that may change behaviour (timing of output, async errors, config);
      applied only with ``--unsafe-fixes``.
    * ``DISPLAY_ONLY``: a suggestion shown to the user, never applied.
    """

    SAFE = "safe"
    UNSAFE = "unsafe"
    DISPLAY_ONLY = "display-only"


@dataclass(frozen=True)
class Edit:
    """A text replacement: ``content`` replaces the 1-based range [start, end)."""

    content: str
    line: int
    col: int
    end_line: int
    end_col: int

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Edit:
        return cls(**data)


@dataclass(frozen=True)
class Fix:
    """A repair for a diagnostic: what it does, how safe it is, and (optionally) its text edits.

    mend's rewriter works on syntax trees, so most fixes carry no edits until the rewriter has
    produced them; ``edits`` is filled where a fix is rendered (``--diff``, SARIF).
    """

    message: str
    applicability: Applicability = Applicability.SAFE
    edits: tuple[Edit, ...] = ()
    decided: bool = False  # `mend fix` decided it applies this fix to these bytes (``[*]``); else undecided

    def to_dict(self) -> dict[str, Any]:
        return {
            "message": self.message,
            "applicability": self.applicability.value,
            "edits": [e.to_dict() for e in self.edits],
            "decided": self.decided,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Fix:
        return cls(
            message=data["message"],
            applicability=Applicability(data.get("applicability", "safe")),
            edits=tuple(Edit.from_dict(e) for e in data.get("edits", ())),
            decided=bool(data.get("decided", False)),
        )


@dataclass(frozen=True)
class Diagnostic:
    """One finding.

    ``code`` is a rule code (``MND101``) or, for a runtime record that no rule predicts, ``MND9xx``.
    ``name`` is the rule's kebab-case name. ``registry_ids`` are the Dynamo graph-break registry ids
    (``GB0059``) the finding predicts (static) or observed (runtime). ``source`` is ``"static"`` or
    ``"runtime"``. ``data`` carries extra, JSON-serialisable facts (counts, gb_type, guard text).
    """

    code: str
    message: str
    path: str
    line: int
    col: int
    end_line: int | None = None
    end_col: int | None = None
    severity: Severity = Severity.ERROR
    name: str = ""
    fix: Fix | None = None
    registry_ids: tuple[str, ...] = ()
    source: str = "static"
    data: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    def __post_init__(self) -> None:
        if self.line < 1 or self.col < 1:
            raise ValueError(f"positions are 1-based, got {self.line}:{self.col}")

    @property
    def fixable(self) -> bool:
        return self.fix is not None and self.fix.applicability is not Applicability.DISPLAY_ONLY

    def sort_key(self) -> tuple[str, int, int, str]:
        return (self.path, self.line, self.col, self.code)

    def location(self) -> str:
        return f"{self.path}:{self.line}:{self.col}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "message": self.message,
            "path": self.path,
            "line": self.line,
            "col": self.col,
            "end_line": self.end_line,
            "end_col": self.end_col,
            "severity": self.severity.value,
            "fix": self.fix.to_dict() if self.fix else None,
            "registry_ids": list(self.registry_ids),
            "source": self.source,
            "data": self.data,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Diagnostic:
        return cls(
            code=data["code"],
            message=data["message"],
            path=data["path"],
            line=int(data["line"]),
            col=int(data["col"]),
            end_line=data.get("end_line"),
            end_col=data.get("end_col"),
            severity=Severity(data.get("severity", "error")),
            name=data.get("name", ""),
            fix=Fix.from_dict(data["fix"]) if data.get("fix") else None,
            registry_ids=tuple(data.get("registry_ids", ())),
            source=data.get("source", "static"),
            data=dict(data.get("data", {})),
        )
