"""mend's rules, one module per family (codes ``MND<category><nn>``).

Each module declares its rules (:class:`Rule`: code, name, docs, examples, fix availability) and the
checkers that find them. Importing this package registers every rule in :data:`RULES` and every
checker in the hook lists of :mod:`~mend.analyzers.static.rules.base`; the order of the imports below
is the order in which checkers of one kind run. See ``docs/adding-a-rule.md``.
"""

from mend.analyzers.static.rules import (  # noqa: F401  (imported for registration)
    control_flow,
    frame_skips,
    meta,
    recompiles,
    scalars,
    side_effects,
    tensor_numbers,
    unsupported,
)
from mend.analyzers.static.rules.base import RULES, RUNTIME_RULES, Finding, FixInfo, Rule, fix_info, rule_for

__all__ = ["RULES", "RUNTIME_RULES", "Finding", "FixInfo", "Rule", "fix_info", "rule_for"]
