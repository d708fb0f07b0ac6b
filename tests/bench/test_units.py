"""Fast tests of mend bench's pieces: statistics, ratios, variants, result loading, the schema, the docs."""

from __future__ import annotations

import json
import re
import statistics
import subprocess
from pathlib import Path

import pytest

from mend.analyzers.runtime.harness import HarnessError, parse_spec
from mend.bench import SCHEMA_VERSION, BenchError, load_result, load_schema, runner, variants
from mend.bench.report import compare

REPO = Path(__file__).resolve().parents[2]


def test_percentile_matches_numpy_linear():
    np = pytest.importorskip("numpy")
    xs = [5.0, 1.0, 9.0, 3.0, 7.0, 2.0, 8.5]
    for q in (0, 10, 50, 90, 100):
        assert runner.percentile(xs, q) == pytest.approx(float(np.percentile(xs, q)))


def test_latency_is_median_of_round_medians():
    rounds = [[0.001, 0.003, 0.002], [0.010, 0.011, 0.012], [0.004, 0.005, 0.006]]
    lat = runner.latency_stats(rounds)
    assert lat["round_medians"] == pytest.approx([2.0, 11.0, 5.0])
    assert lat["median"] == pytest.approx(5.0)  # not the median of all calls (which is 5.0 too) but check p10
    assert lat["p10"] == pytest.approx(runner.percentile([t * 1e3 for r in rounds for t in r], 10))
    assert lat["calls"] == 9 and lat["rounds"] == 3
    assert lat["min"] == pytest.approx(1.0) and lat["max"] == pytest.approx(12.0)
    skewed = runner.latency_stats([[0.001] * 5, [0.001] * 5, [0.1] * 5])
    assert skewed["median"] == pytest.approx(1.0)  # one slow round does not move the median


def _row(variant: str, backend: str, median: float, first: float, compile_s: float, graphs=None, breaks=None):
    return {
        "variant": variant, "backend": backend, "status": "ok", "graphs": graphs, "breaks": breaks,
        "recompiles": 0 if graphs is not None else None, "first_call_s": first, "compile_s": compile_s,
        "latency_ms": {"median": median, "round_medians": [median] * 3},
    }


def test_ratios_come_from_rows_of_the_same_run():
    rows = [
        _row("original", "eager", 10.0, 0.1, 0.0),
        _row("original", "inductor", 5.0, 20.0, 19.0, 3, 2),
        _row("repaired", "eager", 8.0, 0.1, 0.0),
        _row("repaired", "inductor", 2.0, 10.0, 9.5, 1, 0),
        {"variant": "repaired", "backend": "mend", "status": "unavailable", "reason": "x"},
    ]
    runner._add_ratios(rows)
    ind = rows[3]["ratios"]
    assert ind["latency_vs_eager"] == pytest.approx(2.0 / 8.0)
    assert ind["latency_vs_original"] == pytest.approx(2.0 / 5.0)
    assert ind["first_call_vs_original"] == pytest.approx(10.0 / 20.0)
    assert ind["compile_vs_original"] == pytest.approx(9.5 / 19.0)
    assert rows[1]["ratios"]["latency_vs_original"] is None
    assert "ratios" not in rows[4]
    comps = {c["backend"]: c for c in runner._comparisons(rows, ["eager", "inductor", "mend"])}
    assert set(comps) == {"eager", "inductor"}  # mend did not run: no invented comparison
    assert comps["inductor"]["breaks"] == [2, 0] and comps["inductor"]["graphs"] == [3, 1]
    assert comps["inductor"]["warm_speedup"] == pytest.approx(2.5)
    assert comps["inductor"]["cold_speedup"] == pytest.approx(2.0)
    assert comps["eager"]["compile_speedup"] is None  # 0 / 0 is not a speedup


def test_fixed_dir_prefers_a_repaired_copy_of_the_harness(tmp_path, in_repo):
    spec = parse_spec("examples/transformer_block.py:harness")
    (tmp_path / "examples").mkdir()
    (tmp_path / "examples" / "transformer_block.py").write_text("# repaired\n")
    v = variants.from_fixed_dir(spec, tmp_path)
    assert v.harness == f"{tmp_path / 'examples' / 'transformer_block.py'}:harness"
    assert v.search[0] == str(tmp_path) and v.fixed == str(tmp_path)
    other = tmp_path / "flat"
    other.mkdir()
    (other / "transformer_block.py").write_text("# repaired\n")
    assert variants.from_fixed_dir(spec, other).source == str(other / "transformer_block.py")
    shadow_only = tmp_path / "lib"
    shadow_only.mkdir()
    v = variants.from_fixed_dir(spec, shadow_only)
    assert v.harness == str(spec) and v.search == [str(shadow_only)]
    with pytest.raises(HarnessError, match="not a folder"):
        variants.from_fixed_dir(spec, tmp_path / "missing")


def test_auto_repair_runs_mend_fix_on_a_copy(tmp_path, monkeypatch):
    src = tmp_path / "src"
    src.mkdir()
    (src / "model.py").write_text("def harness():\n    print('x')\n")
    (src / "other.py").write_text("X = 1\n")
    spec = parse_spec(f"{src / 'model.py'}:harness")
    seen = {}

    def fake_fix(cmd, **kw):  # stands in for `mend fix DIR`: edits model.py in the copy only
        seen["cmd"] = cmd
        target = Path(cmd[-1]) / "model.py"
        target.write_text(target.read_text().replace("print('x')", "pass"))
        return subprocess.CompletedProcess(cmd, 1, "1 fixed\n", "")

    monkeypatch.setattr(variants.subprocess, "run", fake_fix)
    v, notes = variants.auto_repair(spec, tmp_path / "work")
    assert seen["cmd"][-2:] == ["fix", str(tmp_path / "work" / "repaired")]
    assert (src / "model.py").read_text().count("print") == 1  # the original is untouched
    assert v.source == str(tmp_path / "work" / "repaired" / "model.py")
    assert "it changed model.py" in notes[0] and "other.py" not in notes[0]

    def no_fix(cmd, **kw):
        return subprocess.CompletedProcess(cmd, 2, "", "Error: No such command 'fix'.")

    monkeypatch.setattr(variants.subprocess, "run", no_fix)
    with pytest.raises(variants.RepairUnavailable, match="--fixed DIR"):
        variants.auto_repair(spec, tmp_path / "work2")


def test_load_result_rejects_what_is_not_a_bench_result(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text("{not json")
    with pytest.raises(BenchError, match="not JSON"):
        load_result(bad)
    bad.write_text(json.dumps({"schema": "mend-run", "version": 1}))
    with pytest.raises(BenchError, match="not a mend bench result"):
        load_result(bad)
    bad.write_text(json.dumps({"schema": "mend-bench", "version": 99, "results": []}))
    with pytest.raises(BenchError, match="version 99"):
        load_result(bad)
    with pytest.raises(BenchError, match="cannot read"):
        load_result(tmp_path / "missing.json")


def test_schema_is_valid_and_versioned():
    jsonschema = pytest.importorskip("jsonschema")
    schema = load_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["version"] == {"const": SCHEMA_VERSION}
    assert schema["properties"]["schema"] == {"const": "mend-bench"}


def _field_names(schema: dict) -> set[str]:
    names = set(schema["properties"])
    row = schema["properties"]["results"]["items"]
    names |= set(row["properties"])
    for key in ("latency_ms", "throughput", "peak_memory", "ratios"):
        names |= set(row["properties"][key]["properties"])
    names |= set(schema["properties"]["comparisons"]["items"]["properties"])
    names |= set(schema["properties"]["settings"]["properties"])
    return names


def test_every_schema_field_is_documented():
    doc = (REPO / "docs" / "bench.md").read_text()
    documented = set(re.findall(r"`([a-z_0-9]+)`", doc))
    missing = sorted(_field_names(load_schema()) - documented)
    assert not missing, f"fields of schema.json not described in docs/bench.md: {missing}"
    assert f"version {SCHEMA_VERSION}" in doc


def test_compare_matches_rows_and_flags_other_machines():
    def doc(median, device="AMD"):
        return {
            "created": "t", "platform": "p", "cpu_count": 2, "torch_version": "2.13",
            "device": {"type": "cpu", "name": device},
            "results": [{
                "variant": "original", "backend": "eager", "status": "ok", "breaks": None, "first_call_s": 0.1,
                "latency_ms": {"median": median}, "ratios": {"latency_vs_eager": 1.0},
            }],
        }

    c = compare(doc(10.0), doc(8.0))
    assert c["same_machine"] and len(c["rows"]) == 1
    assert c["rows"][0]["change"] == pytest.approx(-0.2)
    assert not compare(doc(10.0), doc(8.0, device="Intel"))["same_machine"]


def test_median_helper_agrees_with_statistics():
    lat = runner.latency_stats([[0.002, 0.001], [0.004, 0.003]])
    assert lat["median"] == pytest.approx(statistics.median([1.5, 3.5]))


def test_unsteady_rounds_and_a_busy_machine_are_reported():
    """The notes come from the measured rows and the load average, not from a fixed list."""
    def row(backend, medians):
        return {"variant": "original", "backend": backend, "status": "ok",
                "latency_ms": runner.latency_stats([[m / 1e3] for m in medians])}

    rows = [row("eager", [1.0, 1.1, 1.0]), row("inductor", [1.0, 3.0, 1.0]),
            {"variant": "original", "backend": "mend", "status": "unavailable"}]
    notes = runner.timing_notes(rows, [0.2, 0.2, 0.2], 2, "cpu", None)
    assert len(notes) == 1 and "original / inductor" in notes[0] and "eager" not in notes[0]
    busy = runner.timing_notes(rows[:1], [3.5, 2.0, 1.0], 2, "cpu", None)
    assert len(busy) == 1 and "load average 3.50 on 2 CPUs" in busy[0] and "--threads 1" in busy[0]
    assert "--threads 1" not in runner.timing_notes(rows[:1], [3.5, 2.0, 1.0], 2, "cpu", 1)[0]
    assert runner.timing_notes(rows[:1], [0.5, 0.5, 0.5], 2, "cpu", None) == []
