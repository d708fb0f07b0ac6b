"""What fixing a file gives back: :class:`FileResult` with its applied and remaining findings (no torch import)."""

from __future__ import annotations

from dataclasses import dataclass, field

from mend.analyzers.diagnostic import Diagnostic


@dataclass
class AppliedFix:
    code: str
    line: int
    col: int
    message: str
    applicability: str
    strategy: str = ""  # the strategy that made the repair (rewriter/strategies/<name>.py)


@dataclass
class Remaining:
    """A diagnostic still present after fixing, and why mend left it."""

    diagnostic: Diagnostic
    reason: str
    unsafe_available: bool = False


@dataclass
class FileResult:
    path: str
    original: str
    fixed: str
    applied: list[AppliedFix] = field(default_factory=list)
    remaining: list[Remaining] = field(default_factory=list)
    error: str | None = None
    helpers: list[str] = field(default_factory=list)  # the ``_mend_*`` helpers the new text imports (mend.rewriter.helper_module)

    @property
    def changed(self) -> bool:
        return self.fixed != self.original


__all__ = ["AppliedFix", "FileResult", "Remaining"]
