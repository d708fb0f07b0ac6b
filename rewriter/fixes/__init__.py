"""One fixer per rule code: ``fixer(ctx, diagnostic) -> Plan | Decline`` (no torch import)."""

from __future__ import annotations

from mend.rewriter.fixes.branches import fix_branch, fix_validation
from mend.rewriter.fixes.recompile import fix_compile_in_loop, fix_module_attr, fix_varying_scalar
from mend.rewriter.fixes.side_effects import fix_random, fix_side_effect
from mend.rewriter.fixes.values import (
    fix_deepcopy,
    fix_dynamic_op,
    fix_item,
    fix_mask,
    fix_number,
    fix_tolist,
)

FIXERS = {
    "MND101": fix_side_effect,
    "MND102": fix_side_effect,
    "MND103": fix_side_effect,
    "MND104": fix_side_effect,
    "MND105": fix_random,
    "MND106": fix_side_effect,
    "MND108": fix_deepcopy,
    "MND201": fix_branch,
    "MND202": fix_branch,
    "MND203": fix_validation,
    "MND301": fix_item,
    "MND302": fix_number,
    "MND303": fix_tolist,
    "MND304": fix_dynamic_op,
    "MND305": fix_mask,
    "MND401": fix_module_attr,
    "MND402": fix_varying_scalar,
    "MND403": fix_compile_in_loop,
}

__all__ = ["FIXERS"]
