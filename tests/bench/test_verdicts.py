"""mend bench's method without timing anything: the interleaving order, the warm-up until stable, the
verdict on a comparison, processes of one cell, and the table that prints it (a fake worker stands in for
the worker processes)."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest
from rich.console import Console

from mend.bench import report, runner, stats

REPO = Path(__file__).resolve().parents[2]


def test_round_order_puts_every_worker_in_every_position():
    n = 4
    orders = [stats.round_order(n, r) for r in range(n)]
    assert orders[0] == [0, 1, 2, 3] and orders[1] == [1, 2, 3, 0]
    for order in orders:
        assert sorted(order) == list(range(n))
    for pos in range(n):  # over n rounds each worker runs once first, once last, ...
        assert sorted(o[pos] for o in orders) == list(range(n))
    assert stats.round_order(0, 3) == []


def test_until_stable_stops_when_two_batches_agree():
    times = iter([5.0] * 5 + [2.0] * 5 + [1.0] * 5 + [1.01] * 5 + [9.0] * 100)
    got = stats.until_stable(lambda: next(times), batch=5, tol=0.03, max_s=1e9)
    assert got == {"calls": 20, "stable": True, "median_s": 1.01}


def test_until_stable_gives_up_at_its_time_limit():
    clock = itertools.count(0.0, 1.0)  # each batch's check reads a later second
    ticks = itertools.cycle([1.0, 2.0])  # batches alternate: never two alike
    got = stats.until_stable(lambda: next(ticks), batch=1, tol=0.01, max_s=3.5, clock=lambda: next(clock))
    assert got["stable"] is False and 3 <= got["calls"] <= 5


def test_ratio_interval_pairs_rounds():
    base = [10.0, 20.0, 10.0, 20.0, 10.0, 20.0]  # drift that hits both rows alike
    other = [8.0, 16.0, 8.0, 16.0, 8.0, 16.0]
    est, lo, hi = stats.ratio_interval(base, other)
    assert est == pytest.approx(0.8) and lo == pytest.approx(0.8) and hi == pytest.approx(0.8)
    assert stats.ratio_interval(base, other) == stats.ratio_interval(base, other)  # seeded: reproducible
    est, lo, hi = stats.ratio_interval([1.0, 1.0], [0.9, 1.1])
    assert (est, lo, hi) == (pytest.approx(1.0), pytest.approx(0.9), pytest.approx(1.1))
    with pytest.raises(ValueError):
        stats.ratio_interval([], [])


@pytest.mark.parametrize(
    "base, other, noise, want",
    [
        ([1.0, 1.02, 0.98, 1.01, 0.99, 1.0], [0.8, 0.81, 0.79, 0.8, 0.82, 0.8], 0.02, "faster"),
        ([1.0, 1.02, 0.98, 1.01, 0.99, 1.0], [1.2, 1.22, 1.19, 1.2, 1.21, 1.2], 0.02, "slower"),
        # overlapping noise: ratios on both sides of 1
        ([1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [0.9, 1.1, 0.95, 1.05, 0.92, 1.08], 0.02, "within noise"),
        # consistent but tiny: 1% is below the 2% minimum effect
        ([1.0] * 6, [0.99] * 6, 0.02, "within noise"),
        # 8% faster, but separate processes of the same cell disagreed by 10%
        ([1.0] * 6, [0.92] * 6, 0.10, "within noise"),
        ([1.0] * 6, [0.85] * 6, 0.10, "faster"),
    ],
)
def test_verdicts(base, other, noise, want):
    got = stats.compare(base, other, noise)
    assert got["verdict"] == want, got
    lo, hi = got["interval"]
    assert lo <= got["ratio"] <= hi


def test_replicas_combine_per_round_and_measure_their_spread():
    assert stats.combine_replicas([[1.0, 2.0, 3.0], [3.0, 4.0]]) == [2.0, 3.0, 3.0]
    assert stats.process_spread([1.0, 1.1]) == pytest.approx(0.1)
    assert stats.process_spread([1.0]) == 0.0


def test_latency_spread_is_range_over_median():
    lat = stats.latency_stats([[0.001], [0.0011], [0.0009]])
    assert lat["median"] == pytest.approx(1.0) and lat["spread"] == pytest.approx(0.2)


# ------------------------------------------------------------------ the runner with stand-in workers


class FakeWorker:
    """Answers the runner's commands as a worker process would; its round times are ``ms[cell]`` (plus the
    process index, times the spread) and every command is appended to ``LOG``."""

    LOG: list[tuple[str, str, int]] = []
    MS: dict[str, float] = {}
    SPREAD = 0.0

    def __init__(self, variant, backend, cfg, tmp, unavailable=None):
        self.variant, self.backend, self.cfg, self.tmp = variant, backend, cfg, tmp
        self.index = int(tmp.name.rpartition("-p")[2]) if "-p" in tmp.name else 0
        self.row = {"variant": variant.name, "backend": backend, "status": "ok", "reason": None, "source": ""}
        self.times: list[list[float]] = []
        self.cold = None
        self.alive = True
        self.harness_error = None

    def command(self, msg, expect, timeout):
        cell = f"{self.variant.name}/{self.backend}"
        FakeWorker.LOG.append((expect, cell, self.index))
        if expect == "loaded":
            return {"event": "loaded", "batch": 2, "shadowed": ["m.py"], "torch_version": "x", "device_name": "cpu"}
        if expect == "ready":
            return {"event": "ready", "first_call_s": 1.0 + self.index, "compile_s": 0.5,
                    "warmup": {"calls": 10, "stable": True, "median_s": 0.001}}
        if expect == "round":
            ms = FakeWorker.MS[cell] * (1 + FakeWorker.SPREAD * self.index)
            return {"event": "round", "times": [ms / 1e3] * msg["calls"]}
        return {"event": "finished", "counted_by": "x", "graphs": 1, "breaks": 0, "break_events": 0,
                "frames_skipped": 0, "recompiles": 0, "break_sites": [], "recompile_reasons": [],
                "compile_total_s": 0.5, "peak_memory": {"kind": "rss_high_water", "bytes": 2, "baseline_bytes": 1}}

    def stop(self):
        self.alive = False


@pytest.fixture
def fake(monkeypatch, tmp_path):
    FakeWorker.LOG = []
    FakeWorker.SPREAD = 0.0
    monkeypatch.setattr(runner, "_Worker", FakeWorker)
    monkeypatch.setattr(runner, "SETTLE_S", 0.0)
    monkeypatch.setattr(runner, "_check_backends", lambda names: None)
    fixed = tmp_path / "fixed"
    fixed.mkdir()
    monkeypatch.chdir(REPO)
    return fixed


def _run(fixed, **kw):
    settings = runner.Settings(harness="examples/transformer_block.py:harness", fixed=str(fixed), device="cpu",
                               rounds=4, calls=3, **kw)
    return runner.run(settings)


def test_repair_value_interleaves_its_three_cells_and_judges_each(fake):
    FakeWorker.MS = {"original/inductor": 10.0, "repaired/inductor": 9.9, "repaired/mend": 7.0}
    doc = _run(fake, cells=runner.REPAIR_VALUE)
    cells = ["original/inductor", "repaired/inductor", "repaired/mend"]
    assert doc["settings"]["cells"] == cells and doc["settings"]["backends"] == ["inductor", "mend"]
    rounds = [cell for expect, cell, _ in FakeWorker.LOG if expect == "round"]
    assert rounds == [cells[k] for r in range(4) for k in stats.round_order(3, r)]
    colds = [cell for expect, cell, _ in FakeWorker.LOG if expect == "ready"]
    assert colds == cells  # one cold start each, in order, before any round
    assert FakeWorker.LOG.index(("round", cells[0], 0)) > max(
        i for i, e in enumerate(FakeWorker.LOG) if e[0] == "ready")
    versus = {v["cell"]: v for v in doc["versus"]}
    assert set(versus) == {"repaired/inductor", "repaired/mend"}
    assert versus["repaired/inductor"]["warm"]["verdict"] == "within noise"  # 1% apart
    assert versus["repaired/mend"]["warm"]["verdict"] == "faster"
    assert versus["repaired/mend"]["warm"]["ratio"] == pytest.approx(0.7)
    assert doc["comparisons"][0]["backend"] == "inductor"  # the one backend run for both variants
    assert doc["comparisons"][0]["warm_verdict"] == "within noise"

    console = Console(record=True, width=220)
    report.render(doc, console)
    text = console.export_text()
    assert "against original/inductor" in text
    line = next(ln for ln in text.splitlines() if ln.strip("│ ").startswith("repaired/mend"))
    assert "faster (0.70-0.70x)" in line and "0.70x" in line and "7.000" in line
    line = next(ln for ln in text.splitlines() if ln.strip("│ ").startswith("repaired/inductor"))
    assert "within noise" in line
    assert "baseline" in next(ln for ln in text.splitlines() if ln.strip("│ ").startswith("original/inductor"))


def test_processes_of_one_cell_set_the_noise_floor(fake):
    FakeWorker.MS = {"original/eager": 10.0, "repaired/eager": 9.3}
    FakeWorker.SPREAD = 0.10  # the second process of every cell runs 10% slower
    doc = _run(fake, cells=["original/eager", "repaired/eager"], processes=2)
    rounds = [(cell, i) for expect, cell, i in FakeWorker.LOG if expect == "round"]
    assert len(rounds) == 4 * 4 and len(set(rounds)) == 4  # two processes per cell, all in every round
    row = doc["results"][0]
    assert row["latency_ms"]["median"] == pytest.approx(10.5)  # the median over the two processes
    assert row["process_spread"] == pytest.approx(0.1) and len(row["processes"]) == 2
    assert row["first_call_s"] == 1.0  # the first process's cold start
    v = doc["versus"][0]
    assert v["warm"]["ratio"] == pytest.approx(0.93) and v["warm"]["noise"] == pytest.approx(0.1)
    assert v["warm"]["verdict"] == "within noise"  # 7% apart, but processes disagree by 10%
    assert any("differ by more than 5%" in n for n in doc["notes"])


def test_cells_are_checked(fake):
    with pytest.raises(runner.BenchError, match="not VARIANT/BACKEND"):
        _run(fake, cells=["inductor"])
    with pytest.raises(runner.BenchError, match="unknown variant"):
        _run(fake, cells=["fixed/inductor"])
    with pytest.raises(runner.BenchError, match="named twice"):
        _run(fake, cells=["original/mend", "original/mend"])
    with pytest.raises(runner.BenchError, match="drop --backend"):
        _run(fake, cells=["original/mend"], backends=["mend"])
    with pytest.raises(runner.BenchError, match="--processes"):
        _run(fake, processes=0)


def test_outputs_compare_with_the_tolerance_of_their_dtype():
    import torch

    from mend.bench.worker import compare_outputs

    ref = torch.linspace(-4, 4, 1001).to(torch.bfloat16)
    ulp = ref.clone()
    ulp[500] = 0.0625  # an ulp or two of the output's scale, at a value near zero
    got = compare_outputs([ulp], [ref])
    assert got["matches"] and got["max_abs_diff"] == pytest.approx(0.0625, abs=1e-3) and got["rtol"] == 5e-2
    wrong = ref.clone()
    wrong[10:20] += 1.0  # a real change
    assert not compare_outputs([wrong], [ref])["matches"]
    f32 = ref.float()
    near = f32.clone()
    near[500] = 0.0625  # float32 compares element by element: this is a difference
    assert not compare_outputs([near], [f32])["matches"]
    assert compare_outputs([f32 + 1e-6], [f32])["matches"]
    inf = f32.clone()
    inf[0] = float("inf")
    assert not compare_outputs([inf], [f32])["matches"]
    assert "2 output tensors" in compare_outputs([f32, f32], [f32])["detail"]
    ids = torch.arange(5)
    assert compare_outputs([ids], [ids])["matches"] and not compare_outputs([ids + 1], [ids])["matches"]


def test_complex_outputs_compare_both_parts():
    import torch

    from mend.bench.worker import compare_outputs

    z = torch.complex(torch.ones(4), torch.zeros(4))
    assert compare_outputs([z], [z])["matches"]
    assert not compare_outputs([z + 1j], [z])["matches"]  # the imaginary part counts
