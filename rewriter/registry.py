"""Which strategies repair which rule: the engine's registry, read from the rules (no torch import).

A fixable rule names its strategies in order on its entry (``FixInfo(strategies=(...))`` in
:mod:`mend.analyzers.static.rules`): that list is the one place that says what ``mend fix`` tries for a
finding, and in which order. This module imports each strategy the rules name (a module of
:mod:`mend.rewriter.strategies` with a ``repair(ctx, diagnostic)`` function) and hands the lists to the engine,
which knows no strategy itself: :func:`fix_source` is the engine run with them.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from functools import lru_cache
from types import ModuleType

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.rules import RULES
from mend.rewriter import engine
from mend.rewriter.options import FixOptions
from mend.rewriter.results import FileResult
from mend.rewriter.strategy import NamedStrategy, Registry

PACKAGE = "mend.rewriter.strategies"


def strategy_module(name: str) -> ModuleType:
    """The module of the strategy ``name`` (``mend.rewriter.strategies.<name>``)."""
    return importlib.import_module(f"{PACKAGE}.{name}")


@lru_cache(maxsize=1)
def strategies() -> Registry:
    """Rule code -> its strategies, in the order the rule lists them."""
    out: dict[str, tuple[NamedStrategy, ...]] = {}
    for code, rule in sorted(RULES.items()):
        if rule.fix is not None:
            out[code] = tuple(NamedStrategy(name, strategy_module(name).repair) for name in rule.fix.strategies)
    return out


def fixable(code: str) -> bool:
    """``mend fix`` has a repair strategy for ``code``."""
    return code in strategies()


def fix_source(
    source: str,
    path: str = "<string>",
    diagnostics: Sequence[Diagnostic] | None = None,
    options: FixOptions | None = None,
    diagnose: engine.Diagnose | None = None,
) -> FileResult:
    """Repair one file's text (:func:`mend.rewriter.engine.fix_source` with every rule's strategies).
    ``diagnostics`` are the sites to fix; with ``diagnose`` (a function returning the diagnostics of a source
    text) the engine re-checks after every round."""
    return engine.fix_source(source, path, diagnostics, options, diagnose, strategies())


__all__ = ["PACKAGE", "fix_source", "fixable", "strategies", "strategy_module"]
