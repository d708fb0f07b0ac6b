"""The indexes that keep a round of repairs linear in a file's findings give what a scan of everything gives:
``FileContext.find`` reads only the positioned units that hold the line (it read every unit for each site), and
the engine finds the nodes a new edit overlaps among those on its lines (it compared every node taken)."""

from __future__ import annotations

import gc

import libcst as cst
import pytest

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter import FixOptions, workers
from mend.rewriter.context import FileContext
from mend.rewriter.engine import _overlaps, _Taken
from tests.rewriter.conftest import FIXTURES

# a method whose columns cannot be shifted (code after a multi-line string on its last line): its class is
# positioned whole, over the method beside it that was positioned alone
CLASSES = '''import torch


class A(torch.nn.Module):
    def one(self, x):
        print(x)
        return x.sin()

    def two(self, x):
        y = """a
b"""; print(y)
        return x


def f(x):
    print(x)
    return x
'''
TYPES = [cst.Call, cst.Name, cst.SimpleStatementLine, (cst.Call, cst.Attribute), cst.FunctionDef]


def _sources() -> list[tuple[str, str]]:
    return [("classes", CLASSES)] + [(p.name, p.read_text()) for p in sorted(FIXTURES.glob("*.in.py"))]


@pytest.mark.parametrize(("name", "source"), _sources(), ids=[n for n, _ in _sources()])
def test_find_gives_what_a_scan_of_every_unit_gives(name: str, source: str) -> None:
    ctx = FileContext(source, name, FixOptions())
    lines = len(source.splitlines())
    ctx.prepare(range(1, lines + 1, 2))  # not every line: units placed alone and classes around them
    ctx.prepare(range(2, lines + 1, 2))
    sites = sorted({(r.start.line, r.start.column + 1) for r in ctx.positions.values()})
    assert sites
    indexed = [[ctx.find(t, Diagnostic("MND101", "", name, line, col)) for t in TYPES] for line, col in sites]
    assert ctx._placed_starts is not None  # the index was used
    ctx._placed_starts, ctx._by_type = None, {}  # what an overlap of units falls back to: every unit
    scanned = [[ctx.find(t, Diagnostic("MND101", "", name, line, col)) for t in TYPES] for line, col in sites]
    assert all(a is b for row_a, row_b in zip(indexed, scanned) for a, b in zip(row_a, row_b))


def test_a_method_and_its_class_both_positioned_are_read_in_the_order_placed() -> None:
    ctx = FileContext(CLASSES, "classes.py", FixOptions())
    ctx.prepare([6])  # `one` alone
    ctx.prepare([11])  # `two` cannot be: the class A whole
    assert [u[:2] for u in ctx._placed] == [(5, 7), (4, 12)]
    holding = [n for n, _ in ctx._candidates((cst.Call,), 6)]
    assert len(holding) > 2 and holding == [n for i in (0, 1) for n, _ in ctx._placed[i][2] if isinstance(n, cst.Call)]


@pytest.mark.parametrize(("name", "source"), _sources()[:30], ids=[n for n, _ in _sources()[:30]])
def test_a_taken_node_overlaps_as_a_scan_of_every_taken_node_says(name: str, source: str) -> None:
    """``_Taken`` finds the taken nodes an edit overlaps by the lines they share (it compared every pair)."""
    ctx = FileContext(source, name, FixOptions())
    ctx.prepare(range(1, len(source.splitlines()) + 1, 3))
    placed = list(ctx.positions)
    nodes = placed[::7] + [ctx.module, *ctx.module.body]  # some without a position
    for start in range(3):
        taken, scanned = _Taken(ctx), []
        for i, node in enumerate(nodes[start::3]):
            assert taken.overlaps(node) == any(_overlaps(node, other, ctx) for other in scanned)
            if i % 2 == 0:
                taken.take([node])
                scanned.append(node)
        assert any(taken.overlaps(n) for n in nodes) and not all(taken.overlaps(n) for n in nodes)


def test_a_repair_runs_with_fewer_collections_and_gives_the_threshold_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cycle collector runs after ``YOUNG_OBJECTS`` new objects while a file is repaired (after 700 it took a
    quarter of a 0.5 MB file's repair), and as before after it, also when the repair fails."""
    before = gc.get_threshold()
    seen: list[tuple[int, ...]] = []

    def repair(*args):  # noqa: ANN002, ANN202
        seen.append(gc.get_threshold())
        raise RecursionError

    monkeypatch.setattr(workers, "_repair", repair)
    job = workers.Job("x = 1\n", "digest", "x.py", [], None)
    out = workers.repair_file(job, FixOptions(), lambda text, path: [])
    assert out.error and seen == [(workers.YOUNG_OBJECTS, *before[1:])] and gc.get_threshold() == before
