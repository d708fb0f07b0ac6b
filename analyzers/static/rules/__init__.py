"""mend's rules, one module per category (codes ``MND<category><nn>``).

Importing this package registers every rule in :data:`RULES` and every checker in ``CHECKERS``.
"""

from mend.analyzers.static.rules import (  # noqa: F401  (imported for registration)
    control_flow,
    meta,
    recompiles,
    scalars,
    side_effects,
    unsupported,
)
from mend.analyzers.static.rules.base import RULES, Finding, Rule

__all__ = ["RULES", "Finding", "Rule"]
