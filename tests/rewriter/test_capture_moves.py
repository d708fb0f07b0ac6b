"""Capture for one site (``_mend_captured(lambda: E)``) is declined where the break can only move: tensors of
data-dependent lengths collected in a list that ``pad_sequence`` lines up, and a comprehension over a
data-dependent number of elements. Where the list is joined along that length (``torch.cat``) or each
element is reduced, the capture removes the break and is kept. The runtime half counts Dynamo's graphs
with real torch (the decision rests on what torch 2.13 does)."""

from __future__ import annotations

import itertools
import textwrap
from pathlib import Path

import pytest

from mend.analyzers import static
from mend.rewriter import FixOptions, fix_source

HEADER = "import torch\nfrom torch import nn\nfrom torch.nn.utils.rnn import pad_sequence\n\n\nclass M(nn.Module):\n"

# vit-pytorch's adaptive token sampling (ats_vit.py): each row's unique ids, padded to one tensor
PADDED_UNIQUE = """
    def forward(self, ids):
        rows = [torch.unique(t, sorted=True) for t in torch.unbind(ids)]
        padded = pad_sequence(rows, batch_first=True)
        return padded * 2
"""
# NaViT's image ids (na_vit.py): a data-dependent run per image, appended in a loop, padded after it
APPENDED_THEN_PADDED = """
    def forward(self, ids, counts):
        out = []
        for i in range(ids.shape[0]):
            run = torch.repeat_interleave(ids[i], counts[i])
            out.append(run)
        padded = pad_sequence(out, batch_first=True)
        return padded * 2
"""
# one group per distinct id: the comprehension's loop runs a data-dependent number of times
PER_GROUP = """
    def forward(self, y, ids):
        parts = [(y * (ids == g)).sum(0) for g in torch.unique(ids)]
        return torch.stack(parts)
"""
EXTENDED = """
    def forward(self, ids):
        out = []
        out.extend(torch.unique(ids))
        return len(out)
"""

DECLINED = {
    "a comprehension's list padded": (PADDED_UNIQUE, "collected in a list that goes to `pad_sequence`, which "
                                                     "compares their lengths"),
    "a list appended to in a loop, padded": (APPENDED_THEN_PADDED, "`out`: the captured tensors, each of a "
                                                                   "data-dependent length, are collected in a "
                                                                   "list that goes to `pad_sequence`"),
    "a comprehension over unique ids": (PER_GROUP, "a comprehension iterates over the value"),
    "a list extended by the tensor": (EXTENDED, "`.extend()` iterates over the captured value"),
}

# the same collections where the capture removes the break
CONCATENATED = """
    def forward(self, ids):
        rows = [torch.unique(t, sorted=True) for t in torch.unbind(ids)]
        return torch.cat(rows) * 2
"""
REDUCED = """
    def forward(self, ids):
        sums = [torch.unique(t, sorted=True).sum() for t in torch.unbind(ids)]
        return torch.stack(sums)
"""
KEPT = {"concatenated": CONCATENATED, "each reduced": REDUCED}
IDS = [[1, 2, 2, 3], [4, 4, 4, 5]]
_PROGRAMS = itertools.count()


def _fixed(body: str):
    """``HEADER + body`` with its MND304 findings found by ``mend check`` and repaired (unsafe fixes on)."""
    src = HEADER + textwrap.indent(textwrap.dedent(body).lstrip("\n"), "    ")
    config = static.load_config(["."], isolated=True)
    diags = [d for d in static.check_source(src, "t.py", config) if d.code == "MND304"]
    assert len(diags) == 1, diags
    return src, fix_source(src, "t.py", diags, FixOptions(unsafe=True))


@pytest.mark.parametrize("name", sorted(DECLINED))
def test_capture_that_would_move_the_break_is_declined_with_what_the_code_does(name: str) -> None:
    body, reason = DECLINED[name]
    src, res = _fixed(body)
    assert res.fixed == src and res.applied == []
    assert len(res.remaining) == 1 and reason in res.remaining[0].reason, res.remaining[0].reason


@pytest.mark.parametrize("name", sorted(KEPT))
def test_capture_that_removes_the_break_is_kept(name: str) -> None:
    _, res = _fixed(KEPT[name])
    assert [a.code for a in res.applied] == ["MND304"] and "_mend_captured(lambda: torch.unique(" in res.fixed


def _break_lines(source: str, folder: Path, *args) -> list[int]:
    """The lines where Dynamo broke the graph (or skipped the frame) running ``source``'s module ``M`` compiled,
    as mend's recorder sees them; its output equals eager's."""
    import torch

    from mend.analyzers.runtime.recorder import Recorder

    path = folder / f"prog_{next(_PROGRAMS)}.py"
    path.write_text(source, encoding="utf-8")
    ns = {"__name__": path.stem}
    exec(compile(source, str(path), "exec"), ns)  # noqa: S102 - the test's own program
    eager = ns["M"]()(*args)
    torch._dynamo.reset()
    with Recorder(source=[folder]) as rec:
        out = torch.compile(ns["M"](), backend="eager")(*args)
    torch.testing.assert_close(out, eager, rtol=0, atol=0)
    return sorted({b.line for b in rec.breaks})


def _line_of(source: str, text: str) -> int:
    return next(i for i, line in enumerate(source.splitlines(), 1) if text in line)


@pytest.mark.parametrize("name", sorted(KEPT))
def test_kept_capture_removes_the_break(name: str, tmp_path: Path) -> None:
    import torch

    src, res = _fixed(KEPT[name])
    ids = torch.tensor(IDS)
    assert _break_lines(src, tmp_path, ids) == [_line_of(src, "torch.unique(")]
    assert _break_lines(res.fixed, tmp_path, ids) == []


MOVED = {  # the site's expression the rewriter captured before, the inputs
    "a comprehension's list padded": (PADDED_UNIQUE, "torch.unique(t, sorted=True)", lambda t: (t.tensor(IDS),)),
    "a list appended to in a loop, padded": (APPENDED_THEN_PADDED, "torch.repeat_interleave(ids[i], counts[i])",
                                             lambda t: (t.tensor([[1, 2, 3], [4, 5, 6]]),
                                                        t.tensor([[1, 2, 0], [3, 1, 1]]))),
}


@pytest.mark.parametrize("name", sorted(MOVED))
def test_the_declined_capture_would_only_have_moved_the_break(name: str, tmp_path: Path) -> None:
    """What the capture made of these sites before it was declined (ats_vit's rows; NaViT's image ids): the
    operator's break is gone, and the graph breaks at `pad_sequence` instead."""
    import torch

    body, site, inputs = MOVED[name]
    src = HEADER + textwrap.indent(textwrap.dedent(body).lstrip("\n"), "    ")
    captured = src.replace(site, f"_mend_captured(lambda: {site})").replace(
        "import torch\n", "import torch\nfrom _mend import captured as _mend_captured\n", 1)
    assert _break_lines(src, tmp_path, *inputs(torch)) == [_line_of(src, site)]
    assert _break_lines(captured, tmp_path, *inputs(torch)) == [_line_of(captured, "pad_sequence(")]
