"""Classes of Dynamo's graph-break reasons: one table from ``gb_type`` (and, where one gb_type covers
several causes, a pattern over the message) to the class the zoo counts breaks in.

The classes follow what a repair has to do: a tensor used as a Python number (data-dependent operator),
an operator whose output shape depends on data (dynamic-shape operator), an ``if``/``while`` on a tensor
(data-dependent branching), ``.item()``, side effects (print, logging, warnings), and the rest.
"""

from __future__ import annotations

import re

DATA_DEPENDENT_OP = "data-dependent operator"
DYNAMIC_SHAPE_OP = "dynamic-shape operator"
BRANCHING = "data-dependent branching"
ITEM = ".item()"
SIDE_EFFECTS = "side effects"
OTHER = "other"

CLASSES = (DATA_DEPENDENT_OP, DYNAMIC_SHAPE_OP, BRANCHING, ITEM, SIDE_EFFECTS, OTHER)

_SIDE_EFFECT_CALLS = r"`(print|_warnings\.warn|warn|warning|warning_once|info|debug|log|time\.\w+)`|Logger|logging"

# (gb_type, pattern over the message or None, class); the first matching row wins
REASON_CLASSES: list[tuple[str, str | None, str]] = [
    ("Data dependent operator", None, DATA_DEPENDENT_OP),
    ("Tensor.tolist() with non-integer tensor", None, DATA_DEPENDENT_OP),
    ("Dynamic slicing with Tensor arguments", None, DATA_DEPENDENT_OP),
    ("Dynamic shape operator", None, DYNAMIC_SHAPE_OP),
    ("Dynamic shape operator (no meta kernel)", None, DYNAMIC_SHAPE_OP),
    ("Data-dependent branching", None, BRANCHING),
    ("Data-dependent assertion failed (cannot compile partial graph)", None, BRANCHING),
    ("Unsupported Tensor.item() call with capture_scalar_outputs=False", None, ITEM),
    ("logging.Logger method not supported for non-export cases", None, SIDE_EFFECTS),
    ("Failed to trace builtin operator", r"`print`", SIDE_EFFECTS),
    ("Attempted to call function marked as skipped", _SIDE_EFFECT_CALLS, SIDE_EFFECTS),
    ("Unsupported function call", r"warn", SIDE_EFFECTS),
]

_ROWS = [(gb, re.compile(pat) if pat else None, cls) for gb, pat, cls in REASON_CLASSES]


def reason_class(gb_type: str, message: str = "") -> str:
    """The class of a break from its Dynamo ``gb_type`` and (for shared gb_types) its message."""
    for gb, pat, cls in _ROWS:
        if gb == gb_type and (pat is None or pat.search(message)):
            return cls
    return OTHER
