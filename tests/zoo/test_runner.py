"""Worker processes: rows in sequence, a timeout or a crash costs one row and the next gets a fresh worker."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip("transformers")

from benchmarks.zoo import records as R  # noqa: E402
from benchmarks.zoo.runner import Settings, Worker, WorkerDied, run_zoo  # noqa: E402
from benchmarks.zoo.sources import prepare  # noqa: E402
from benchmarks.zoo.specs import ModelSpec, specs  # noqa: E402


@pytest.mark.slow
def test_a_row_past_its_timeout_is_killed_and_reported(tmp_path):
    worker = Worker(prepare("original", log=lambda m: None), Settings(), tmp_path, tmp_path / "w.log")
    with pytest.raises(WorkerDied, match="no result within") as info:
        worker.ask("t5", timeout=0.01)
    assert info.value.status == R.TIMEOUT and worker.proc.poll() is not None  # the process is gone


@pytest.mark.slow
def test_rows_run_in_one_worker_and_an_unknown_row_is_a_build_error(tmp_path):
    rows = [*specs(["bert"]), ModelSpec("no-such-row"), *specs(["gpt2"])]
    res = run_zoo(rows, ["original"], Settings(jobs=1, timeout=300), out_dir=tmp_path, log=lambda m: None)
    by = res.by("original")
    assert by["no-such-row"].status == R.BUILD_ERROR and "unknown model type" in by["no-such-row"].error
    for name in ("bert", "gpt2"):
        r = by[name]
        assert r.status == R.OK and r.graphs == 1 and r.breaks == [] and r.compiled_matches is True
        assert r.eager_deterministic is True and r.params and r.outputs
        assert set(torch.load(r.outputs, weights_only=True)) == {"eager"}  # what the sources are compared on
        assert any(path.startswith("models/") for path, *_ in r.traced)
    assert len(list(tmp_path.glob("worker-*.log"))) == 1  # an unknown row is a build error: the worker goes on


@pytest.mark.slow
def test_dynamo_capture_setting_switches_capture_on_in_the_workers(tmp_path):
    """`--dynamo-capture` (the baseline the scoped-capture repair is measured against): LED's
    `is_index_global_attn.flatten().any().item()` breaks by default and is captured with the setting."""
    item = "Unsupported Tensor.item() call with capture_scalar_outputs=False"
    seen = {}
    for capture in (False, True):
        res = run_zoo(specs(["led"]), ["original"], Settings(timeout=300, capture=capture),
                      out_dir=tmp_path / str(capture), log=lambda m: None)
        rec = res.by("original")["led"]
        assert rec.status == R.OK and res.settings["capture"] is capture
        seen[capture] = {b.gb_type for b in rec.breaks}
    assert item in seen[False] and item not in seen[True]


@pytest.mark.parametrize(("error", "broken"), [
    ("AcceleratorError: CUDA error: device-side assert triggered", True),
    ("RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx(`", True),
    ("RuntimeError: Unsupported dtype BFloat16", False),
    ("", False),
])
def test_a_cuda_error_retires_the_worker(error, broken):
    """A CUDA error sticks to the worker's device context: every later row of that worker would fail with it."""
    from benchmarks.zoo.runner import _device_broken

    rec = R.Record(name="m", model_type="m", variant=None, source="original", dtype="bf16", profile="tiny",
                   status=R.EAGER_ERROR if error else R.OK, error=error or None)
    assert _device_broken(rec) is broken


def test_messages_that_differ_in_shared_workers_are_compared_again_in_fresh_processes(tmp_path, monkeypatch):
    # a worker gives a once-per-process warning only in the first row it serves: the repaired row, served second
    # in its worker, "lost" it; in fresh processes both give it, and the row is the same. A repair that really
    # drops a print still differs.
    from benchmarks.zoo import runner
    from benchmarks.zoo.records import Record, SourceInfo

    once = ["warning", "UserWarning", "", "sparse invariant checks are disabled"]
    printed = ["stdout", "", "", "step"]

    class Fresh:  # a worker just started: the row gives the once-per-process warning, and the source's prints
        def __init__(self, source, settings, out, log):
            self.source = source
            assert out == tmp_path / "fresh" and log.parent == out  # apart from the compared outputs

        def ask(self, name, timeout, mode="eval"):
            msgs = [once] + ([printed] if self.source.name == "original" or name == "kept" else [])
            return Record(name=name, model_type=name, variant="", source=self.source.name, mode=mode,
                          messages={"eager": msgs})

        def close(self):
            pass

    monkeypatch.setattr(runner, "Worker", Fresh)

    def rec(name, source, msgs):
        return Record(name=name, model_type=name, variant="", source=source, messages={"eager": msgs})
    records = [rec("kept", "original", [once, printed]), rec("kept", "safe", [printed]),
               rec("dropped", "original", [once, printed]), rec("dropped", "safe", [])]
    runner.compare_sources(records)
    assert [r.messages_ok for r in records if r.source == "safe"] == [False, False]
    infos = {s: SourceInfo(name=s, path=str(tmp_path)) for s in ("original", "safe")}
    said: list[str] = []
    runner.recheck_messages(records, infos, Settings(), tmp_path, said.append)
    kept, dropped = (r for r in records if r.source == "safe")
    assert kept.messages_ok is True and kept.messages_shared_diff["eager"]["lost"] == 1
    assert dropped.messages_ok is False and dropped.messages_diff["eager"]["lost"] == 1
    assert dropped.messages_diff["eager"]["first"] == ["lost: [stdout] step"]
    assert said == ["messages of kept (eval, safe) rechecked in fresh processes: the same",
                    "messages of dropped (eval, safe) rechecked in fresh processes: they differ"]
