"""The fixer registry: ``@fixer("MND201")`` binds a repair function to the rule codes it repairs.

A fixer is ``fn(ctx: FileContext, diagnostic) -> Plan | Decline`` (:mod:`mend.rewriter.engine`): a
proven repair, or the reason there is none for this site. It lives in the fix module named after its
rule's family (``rules/control_flow.py`` -> ``fixes/control_flow.py``). What the fix does (availability,
applicability, safety notes) is declared once, on the rule (``Rule(fix=FixInfo(...))`` in
:mod:`mend.analyzers.static.rules`), so ``mend check`` and ``mend rule`` know it without importing
LibCST; registering a fixer for a rule that declares no fix is an error, and a test checks that every
rule that declares one has its fixer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.rules import RULES

if TYPE_CHECKING:
    from mend.rewriter.engine import Decline, FileContext, Plan

Fixer = Callable[["FileContext", Diagnostic], "Plan | Decline"]

_FIXERS: dict[str, Fixer] = {}


def fixer(*codes: str) -> Callable[[Fixer], Fixer]:
    """Register the decorated function as the fixer of ``codes``."""

    def deco(fn: Fixer) -> Fixer:
        for code in codes:
            rule = RULES.get(code)
            if rule is None or rule.fix is None:
                raise ValueError(f"fixer {fn.__name__} for {code}: no rule {code} declares a fix (Rule(fix=...))")
            if code in _FIXERS:
                raise ValueError(f"two fixers for {code}: {_FIXERS[code].__name__} and {fn.__name__}")
            _FIXERS[code] = fn
        return fn

    return deco


def fixer_for(code: str) -> Fixer | None:
    """The fixer of ``code``, or None when mend has no repair for it."""
    return _FIXERS.get(code)


def fixers() -> dict[str, Fixer]:
    """Every registered fixer, by rule code."""
    return dict(_FIXERS)
