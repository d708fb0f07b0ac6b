"""The reason-class table: Dynamo's gb_type (and message) -> the class the zoo counts breaks in."""

from __future__ import annotations

import pytest

from benchmarks.zoo.reasons import CLASSES, REASON_CLASSES, reason_class


@pytest.mark.parametrize("gb_type, message, expected", [
    ("Data dependent operator", "Operator `aten._local_scalar_dense.default` has a non-Tensor output", "data-dependent operator"),
    ("Tensor.tolist() with non-integer tensor", "", "data-dependent operator"),
    ("Dynamic shape operator", "Operator `aten.nonzero.default`'s output shape depends on input Tensor data.",
     "dynamic-shape operator"),
    ("Data-dependent branching", "Detected data-dependent branching", "data-dependent branching"),
    ("Unsupported Tensor.item() call with capture_scalar_outputs=False", "", ".item()"),
    ("logging.Logger method not supported for non-export cases", "", "side effects"),
    ("Failed to trace builtin operator", "Dynamo does not know how to trace builtin operator `print` with argument "
     "types ['str']", "side effects"),
    ("Failed to trace builtin operator", "Dynamo does not know how to trace builtin operator `str`", "other"),
    ("Attempted to call function marked as skipped", "Dynamo does not know how to trace the Python builtin "
     "`_warnings.warn`.", "side effects"),
    ("Attempted to call function marked as skipped", "Dynamo developers have intentionally marked that the "
     "function `save` in file `torch/serialization.py` should not be traced", "other"),
    ("Attempted to wrap RNN, GRU, or LSTM", "", "other"),
    ("a gb_type no table row names", "", "other"),
])
def test_reason_class(gb_type, message, expected):
    assert reason_class(gb_type, message) == expected


def test_every_row_names_a_known_class():
    assert {cls for _, _, cls in REASON_CLASSES} <= set(CLASSES)
