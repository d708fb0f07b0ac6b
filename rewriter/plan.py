"""What a repair strategy answers (:class:`Plan`, :class:`Decline`) and its examples (no torch import).

See :mod:`mend.rewriter.strategy` for what a strategy is and how a rule's strategies are tried.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass, field
from typing import Any

import libcst as cst

from mend.analyzers.diagnostic import Diagnostic


@dataclass
class Plan:
    """A proven repair: replace each ``edits`` node (by identity) with its replacement."""

    diagnostic: Diagnostic
    message: str
    applicability: str  # "safe" | "unsafe"
    edits: list[tuple[cst.CSTNode, Any]]
    imports: list[tuple[str, str | None, str | None]] = field(default_factory=list)
    helpers: list[str] = field(default_factory=list)  # the ``_mend_*`` functions the new code calls
    drop_imports: list[str] = field(default_factory=list)  # modules whose import may now be unused
    # a generic repair (capture for one site): any specific repair whose edits overlap it goes first
    fallback: bool = False
    strategy: str = ""  # the strategy that made it (set by :func:`mend.rewriter.strategy.first_plan`)
    # where the repaired code still breaks, by design, under a configuration the repair cannot see ("in
    # training where the probability is above 0"); "": the break goes wherever the code runs
    keeps_break: str = ""


@dataclass
class Decline:
    """No repair for this site, and why (``final``: the rule's later strategies are not tried)."""

    diagnostic: Diagnostic
    reason: str
    unsafe_available: bool = False
    final: bool = True


@dataclass(frozen=True)
class Example:
    """A strategy's before/after example (Fixit's VALID/INVALID, for a repair).

    ``before`` is a small program with a finding of ``rule`` (``mend check`` reports it), ``after`` exactly
    what ``mend fix`` writes for it (with the options ``unsafe``, ``side_effects`` and ``torch_rng``). ``run`` is an
    expression that runs the program, wrapping what is compiled in ``compile(...)``: the test evaluates it
    eagerly on both texts (the results must be bitwise equal, and for a safe repair the printed output
    too) and under ``torch.compile``, where ``before`` shows the rule's problem (a graph break, or a
    recompile) and ``after`` compiles one graph without a break."""

    rule: str
    before: str
    after: str
    run: str
    unsafe: bool = False
    side_effects: str = "keep"
    torch_rng: bool = False

    def __post_init__(self) -> None:
        # the newline after the opening quotes is not part of the text (a blank first line still can be)
        object.__setattr__(self, "before", textwrap.dedent(self.before).removeprefix("\n"))
        object.__setattr__(self, "after", textwrap.dedent(self.after).removeprefix("\n"))


__all__ = ["Decline", "Example", "Plan"]
