"""The zoo end to end on the rows that break the graph: original vs `mend fix` (safe), in worker processes.

The rows come from ``benchmarks/zoo/breaking.json`` (written by a full run with ``--write-breaking``). The repaired copy
fixes the files Dynamo traced for these rows (``scope="traced"``), not the whole package: the same repairs
of the code these rows run, at a fraction of the time. It asserts what the zoo exists to show: every row
builds and runs, no safe fix changed an eager output (or made a row fail), and compiled outputs match eager.
"""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from benchmarks.zoo import records as R  # noqa: E402
from benchmarks.zoo.cli import ci_rows  # noqa: E402
from benchmarks.zoo.runner import Settings, run_zoo  # noqa: E402
from benchmarks.zoo.specs import specs  # noqa: E402


@pytest.mark.slow
@pytest.mark.xdist_group("zoo")
def test_breaking_rows_build_repair_safely_and_compile_to_eager(tmp_path):
    rows = ci_rows()
    assert len(rows) >= 20
    res = run_zoo(specs(rows, variants=False), ["original", "safe"], Settings(jobs=2, timeout=300),
                  out_dir=tmp_path / "out", cache_dir=tmp_path / "cache", scope="traced", check_idempotent=False,
                  log=lambda m: None)
    original, safe = res.by("original"), res.by("safe")
    assert res.sources["safe"].fix.errors == [] and res.sources["safe"].fix.unparsable == []
    assert res.sources["safe"].fix.changed > 0  # the repair did something to the code these rows run
    not_running = {n: f"{r.status}: {r.error}" for n, r in original.items() if r.status != R.OK}
    assert not not_running, not_running
    assert all(r.breaks for r in original.values())  # the list still names rows that break
    changed = {n: (r.status, r.error, r.eager_max_abs_diff, r.eager_note) for n, r in safe.items()
               if r.status != R.OK or r.eager_same is not True}
    assert not changed, f"safe fixes changed these rows' eager output: {changed}"
    off = {(r.source, r.name): r.compiled_max_abs_diff for r in res.records if r.compiled_matches is not True}
    assert not off, f"compiled output off eager: {off}"
