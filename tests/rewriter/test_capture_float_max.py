"""Capture declines an ``.item()`` that meets a float in Python's ``max``/``min``: eager's ``max(6, 1.5)`` is the
int 6, Dynamo's with the scalar captured is a float, and an int64 tensor multiplied by it becomes float32 (found by
the property tests, seed 108: ``x * max(x.sum().item(), 1.5)``)."""

from __future__ import annotations

import pytest

from mend.analyzers.static import Config, check_source
from mend.rewriter import FixOptions, fix_source

SOURCE = '''import torch


@torch.compile(backend="eager")
def f(x: torch.Tensor):
    return x * max(x.sum().item(), 1.5)


@torch.compile(backend="eager")
def g(x: torch.Tensor):
    return x * max(x.sum().item(), 2)
'''


def test_capture_declines_an_item_beside_a_float_in_max_and_keeps_the_int_case() -> None:
    res = fix_source(SOURCE, "t.py", options=FixOptions(unsafe=True),
                     diagnose=lambda text: list(check_source(text, "t.py", Config())))
    assert [(a.code, a.line) for a in res.applied] == [("MND301", 11)]
    left = {r.diagnostic.line: r.reason for r in res.remaining}
    assert "`max()` of the captured integer and a float gives a float" in left[6]


def test_dynamo_turns_the_max_of_a_captured_int_and_a_float_into_a_float() -> None:
    torch = pytest.importorskip("torch")

    def h(x):
        return x * max(x.sum().item(), 1.5)

    x = torch.arange(4)
    torch._dynamo.reset()
    with torch._dynamo.config.patch(capture_scalar_outputs=True):
        compiled = torch.compile(h, backend="eager")(x)
    assert h(x).dtype == torch.int64 and compiled.dtype == torch.float32  # what the declined repair would change
