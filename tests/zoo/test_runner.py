"""Worker processes: rows in sequence, a timeout or a crash costs one row and the next gets a fresh worker."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")

from mend.zoo import records as R  # noqa: E402
from mend.zoo.runner import Settings, Worker, WorkerDied, run_zoo  # noqa: E402
from mend.zoo.sources import prepare  # noqa: E402
from mend.zoo.specs import ModelSpec, specs  # noqa: E402


@pytest.mark.slow
def test_a_row_past_its_timeout_is_killed_and_reported(tmp_path):
    worker = Worker(prepare("original", log=lambda m: None), Settings(), tmp_path, tmp_path / "w.log")
    with pytest.raises(WorkerDied, match="no result within") as info:
        worker.ask("t5", timeout=0.01)
    assert info.value.status == R.TIMEOUT and worker.proc.poll() is not None  # the process is gone


@pytest.mark.slow
def test_rows_run_in_one_worker_and_a_crash_costs_one_row(tmp_path):
    rows = [*specs(["bert"]), ModelSpec("no-such-row"), *specs(["gpt2"])]  # the worker dies on the unknown row
    res = run_zoo(rows, ["original"], Settings(jobs=1, timeout=300), out_dir=tmp_path, log=lambda m: None)
    by = res.by("original")
    assert by["no-such-row"].status == R.CRASH and "unknown model type" in by["no-such-row"].error
    for name in ("bert", "gpt2"):
        r = by[name]
        assert r.status == R.OK and r.graphs == 1 and r.breaks == [] and r.compiled_matches is True
        assert r.eager_deterministic is True and r.params and r.outputs
        assert any(path.startswith("models/") for path, *_ in r.traced)
    assert len(list(tmp_path.glob("worker-*.log"))) == 2  # one worker for bert, a fresh one after the crash
