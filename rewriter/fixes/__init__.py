"""The fixers of ``mend fix``, one module per rule family (no torch import).

``side_effects`` (MND1xx), ``control_flow`` (MND2xx), ``scalars`` and ``tensor_numbers`` (MND3xx),
``recompiles`` (MND4xx), ``unsupported`` (MND5xx):
each fixer registers itself with ``@fixer(code)`` (:mod:`mend.rewriter.fixes.base`); importing this
package registers them all. See ``docs/adding-a-rule.md``.
"""

from __future__ import annotations

from mend.rewriter.fixes import (  # noqa: F401  (registration)
    control_flow,
    recompiles,
    scalars,
    side_effects,
    tensor_numbers,
    unsupported,
)
from mend.rewriter.fixes.base import Fixer, fixer, fixer_for, fixers

__all__ = ["Fixer", "fixer", "fixer_for", "fixers"]
