"""What a repair strategy is, and how a rule's strategies are tried (no torch import).

A **strategy** is one way to repair a finding: a function ``repair(ctx, diagnostic)`` in its own module of
:mod:`mend.rewriter.strategies`, taking the parsed file (:class:`~mend.rewriter.context.FileContext`) and
the finding, and answering one of three things:

* a :class:`~mend.rewriter.plan.Plan`: the repair, proven safe (or marked unsafe) for this site; the engine
  applies it;
* a :class:`~mend.rewriter.plan.Decline`: this strategy's pattern is here but it cannot be repaired, and why.
  A final decline (the default) ends the rule's list there: a more generic strategy after it would be the
  worse answer. ``Decline(..., final=False)`` lets the next strategies try; when none repairs the site, the
  reasons are collected into one;
* ``None``: not this strategy's pattern; the next one is tried.

A fixable rule names its strategies in order (``FixInfo(strategies=...)`` on the rule, in
:mod:`mend.analyzers.static.rules`); :mod:`mend.rewriter.registry` imports them and :func:`first_plan` runs
such a list. :func:`repair_as` runs another rule's list on a site (a ``.item()`` in the test of an ``if`` is
repaired as the branch, MND201). Each strategy module also holds its before/after
:class:`~mend.rewriter.plan.Example` s, run as tests against Dynamo (``tests/rewriter/test_strategies.py``).
A plan whose repair leaves its break by design under a configuration the strategy cannot see (the LayerDrop
guard, in training where the probability is above 0) names that configuration (``Plan.keeps_break``), and its
message says so too.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from mend import deadline
from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.rules import rule_for
from mend.rewriter.context import FileContext
from mend.rewriter.plan import Decline, Plan

Strategy = Callable[[FileContext, Diagnostic], "Plan | Decline | None"]


@dataclass(frozen=True)
class NamedStrategy:
    """A strategy as the registry holds it: its module's name and its ``repair`` function."""

    name: str
    repair: Strategy


def first_plan(ctx: FileContext, diag: Diagnostic, strategies: Sequence[NamedStrategy],
               exhausted: str) -> Plan | Decline:
    """The first plan of ``strategies`` for ``diag``, tried in order; else one decline whose reason collects
    every strategy's (``exhausted`` when none said anything)."""
    declines: list[Decline] = []
    for strategy in strategies:
        deadline.check()  # the file's time limit (mend.deadline)
        result = strategy.repair(ctx, diag)
        if isinstance(result, Plan):  # a plan another rule's list made (repair_as) says so: "branch_test/where_select"
            result.strategy = f"{strategy.name}/{result.strategy}" if result.strategy else strategy.name
            return result
        if isinstance(result, Decline):
            declines.append(result)
            if result.final:
                break
    if not declines:
        return Decline(diag, exhausted)
    reasons = dict.fromkeys(d.reason for d in declines)
    return Decline(diag, "; ".join(reasons), unsafe_available=any(d.unsafe_available for d in declines))


Registry = Mapping[str, Sequence[NamedStrategy]]  # rule code -> its strategies, in order


def no_fix_reason(code: str) -> str:
    """Why ``mend fix`` leaves a finding of ``code`` that has no strategy (the rule's ``no_fix``, if it says)."""
    rule = rule_for(code)
    return (rule.no_fix if rule is not None else "") or "no automatic fix for this rule"


def repair_as(ctx: FileContext, code: str, diag: Diagnostic) -> Plan | Decline:
    """The repair of ``diag``'s site by rule ``code``'s strategies (the registry the engine gave ``ctx``).
    Always a plan or a final decline."""
    result = first_plan(ctx, dataclasses.replace(diag, code=code), ctx.strategies.get(code, ()), no_fix_reason(code))
    result.diagnostic = diag
    if isinstance(result, Decline):
        result.final = True
    return result


__all__ = ["NamedStrategy", "Registry", "Strategy", "first_plan", "no_fix_reason", "repair_as"]
