"""Ahead-of-time, parallel compilation of Triton kernels (``mend.compiler.codegen.triton.aot``) on a CPU-only machine.

The compile workers build real sm_90 cubins without a GPU (explicit target). What needs a GPU (loading the
cubin, the static launch) is in ``test_triton_gpu.py``; here the launch decision (alignment, fallback) is
checked with a stand-in kernel.
"""

from __future__ import annotations

import os
import signal

import pytest
import torch

pytest.importorskip("triton")

from torch.fx.experimental.proxy_tensor import make_fx  # noqa: E402

from mend.compiler.codegen.triton import aot as triton_aot  # noqa: E402
from mend.compiler.codegen.triton import build as triton_build  # noqa: E402
from mend.compiler.codegen.triton import launch as triton_launch  # noqa: E402
from mend.compiler.codegen.triton.generator import TritonGenerator  # noqa: E402
from mend.compiler.codegen.triton.module import render_module  # noqa: E402
from mend.compiler.lowering.decomps import decomposition_table  # noqa: E402
from mend.settings import SettingWarning  # noqa: E402

from .helpers import lower_and_schedule  # noqa: E402

SM90 = ("cuda", 90, 32)


@pytest.fixture(autouse=True)
def _env(monkeypatch, tmp_path):
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path / "mend"))
    monkeypatch.setenv("TRITON_CACHE_DIR", str(tmp_path / "triton"))
    monkeypatch.setenv("MEND_COMPILE_WORKERS", "2")
    triton_aot.shutdown()
    yield
    triton_aot.shutdown()


def launchers(fn, *args, **opts):
    gm = make_fx(fn, decomposition_table=decomposition_table(), tracing_mode="fake")(*args)
    sg = lower_and_schedule(gm, args, "cuda")
    sources, bad = TritonGenerator(interpret=False, **opts).sources(sg.kernels)
    assert not bad
    module = triton_build.load_module(render_module(sources, interpret=False))
    out = []
    for s in sources:
        if s.plan.template == "split":
            out.append(triton_launch.TritonSplitLauncher(s.k, *[getattr(module, n) for n in s.fn_names], s))
        else:
            out.append(triton_launch.TritonLauncher(s.k, getattr(module, s.fn_name), s))
    return module, out


def _cache_entries(tmp_path) -> set[str]:
    root = tmp_path / "triton"
    return {p.name for p in root.iterdir()} if root.exists() else set()


@pytest.mark.slow
def test_workers_compile_every_candidate_for_sm90_and_the_cache_serves_repeats(tmp_path):
    x = torch.randn(2048, 1024)
    module, ls = launchers(lambda x: (torch.softmax(x * 0.5, -1), torch.relu(x) + 1), x)
    for launcher in ls:
        launcher.precompile(module, SM90, torch.device("cpu"))
    # large kernels are autotuned: every candidate configuration is compiled ahead
    assert sum(len(launcher.aot) for launcher in ls) == sum(len(launcher.plan.configs) for launcher in ls) > len(ls)
    results = [f.result() for launcher in ls for f in launcher.aot.values()]
    for r in results:
        assert "error" not in r, r
        assert os.path.exists(r["cubin_path"]) and r["cubin_path"].endswith(".cubin")
        assert r["name"].startswith("mend_") and r["num_warps"] >= 1 and r["shared"] >= 0
        assert all(t.startswith("*") for t in r["arg_types"])
    assert triton_aot.STATS["workers_started"] >= 2
    entries = _cache_entries(tmp_path)
    # the same jobs again: Triton's cache answers, nothing new is built, same binaries
    again = [triton_aot.submit(triton_aot.job_for(module, launcher.source.fn_name, launcher.source.signature(),
                                                  launcher.plan.configs[0].constexprs(launcher.template),
                                                  launcher.plan.configs[0].options(), SM90)).result()
             for launcher in ls]
    assert _cache_entries(tmp_path) == entries
    assert {r["hash"] for r in again} <= {r["hash"] for r in results}


def test_small_kernels_compile_only_the_heuristic_configuration(tmp_path):
    x = torch.randn(16, 64)
    module, ls = launchers(lambda x: torch.softmax(x, -1) * 2, x)
    (launcher,) = ls
    assert launcher.candidates(torch.device("cpu")) == [0]
    launcher.precompile(module, SM90, torch.device("cpu"))
    assert list(launcher.aot) == [0]
    assert "error" not in launcher.aot[0].result()


def test_a_recorded_autotune_winner_is_the_only_candidate(monkeypatch):
    x = torch.randn(2048, 1024)
    _, (launcher,) = launchers(lambda x: torch.relu(x) * 3, x)
    assert len(launcher.plan.configs) > 1
    dev = torch.device("cpu")
    assert launcher.candidates(dev) == list(range(len(launcher.plan.configs)))
    win = launcher.plan.configs[1]
    triton_launch.write_tuned(triton_launch._tune_key(launcher.kernel_text, dev),
                               {"config": [win.XBLOCK, win.RBLOCK, win.num_warps]})
    assert launcher.candidates(dev) == [1]
    monkeypatch.setenv("MEND_TRITON_AUTOTUNE", "0")
    assert launcher.candidates(dev) == [0]


def test_split_reduction_compiles_both_kernels():
    module, ls = launchers(lambda y: y.argmax(), torch.randn(3 * 2**20))  # the split template (argmax)
    (launcher,) = ls
    assert isinstance(launcher, triton_launch.TritonSplitLauncher)
    launcher.precompile(module, SM90, torch.device("cpu"))
    names = [f.result().get("name") for f in launcher.aot.values()]
    assert names == launcher.source.fn_names


def test_without_workers_the_compile_runs_in_the_calling_thread(monkeypatch):
    monkeypatch.setenv("MEND_COMPILE_WORKERS", "0")
    module, (launcher,) = launchers(lambda x: x.exp() + 1, torch.randn(100))
    launcher.precompile(module, SM90, torch.device("cpu"))
    fut = launcher.aot[0]
    assert isinstance(fut, triton_aot._LazyFuture) and not fut.done()
    assert "error" not in fut.result() and fut.done()
    assert triton_aot.pool() is None


def test_a_failing_job_reports_its_error_and_the_worker_goes_on():
    module, (launcher,) = launchers(lambda x: x.exp() + 1, torch.randn(100))
    sig = launcher.source.signature()
    cfg = launcher.plan.configs[0]
    bad = triton_aot.submit(triton_aot.job_for(module, "no_such_kernel", sig, cfg.constexprs("pointwise"),
                                               cfg.options(), SM90)).result()
    assert "AttributeError" in bad["error"]
    good = triton_aot.submit(triton_aot.job_for(module, launcher.source.fn_name, sig, cfg.constexprs("pointwise"),
                                                cfg.options(), SM90)).result()
    assert "error" not in good


def test_a_dead_worker_is_replaced():
    module, (launcher,) = launchers(lambda x: x.exp() + 1, torch.randn(100))
    sig, cfg = launcher.source.signature(), launcher.plan.configs[0]
    job = triton_aot.job_for(module, launcher.source.fn_name, sig, cfg.constexprs("pointwise"), cfg.options(), SM90)
    p = triton_aot.pool()
    workers = list(p.idle.queue)
    for w in workers:
        os.kill(w.proc.pid, signal.SIGKILL)
        w.proc.wait()
    first = [triton_aot.submit(job).result() for _ in workers]
    assert all("compile worker failed" in r["error"] for r in first)
    assert "error" not in triton_aot.submit(job).result()  # replacements took over


def test_load_logs_once_and_returns_none_when_the_kernel_cannot_be_loaded(caplog):
    fut = triton_aot._LazyFuture({})
    fut._res = {"error": "boom"}
    with caplog.at_level("WARNING", logger="mend.compiler"):
        assert triton_aot.load(fut, 0, "kernel k") is None
        assert triton_aot.load(fut, 0, "kernel k") is None
    assert sum("boom" in r.message for r in caplog.records) == 1
    # a CPU build of torch has no static CUDA launcher: the JIT path is used
    ok = triton_aot._LazyFuture({})
    ok._res = {"name": "k", "cubin_path": __file__, "shared": 0, "num_warps": 4, "arg_types": ["*fp32"]}
    if triton_aot.compat.static_cuda_launcher() is None:
        assert triton_aot.load(ok, 0, "kernel k2") is None


class _Recorder:
    def __init__(self, fail=False):
        self.calls, self.fail = [], fail

    def launch(self, grid, tensors, index):
        if self.fail:
            raise RuntimeError("launch failed")
        self.calls.append((grid, len(tensors)))


def test_static_launch_needs_aligned_pointers_and_gives_way_after_a_failure(monkeypatch, caplog):
    monkeypatch.setattr(triton_aot.compat, "static_cuda_launcher", lambda: None)
    _, (launcher,) = launchers(lambda x: x.exp() + 1, torch.randn(100))
    monkeypatch.setattr(triton_launch, "_device_index", lambda tensors: 0)
    rec = _Recorder()
    launcher.static[0] = rec
    base = torch.empty(132)
    aligned = (base[:100], base[4:104])  # 16-byte offsets
    assert triton_launch._launch_static(launcher, 0, (1,), aligned) is rec
    assert rec.calls == [((1,), 2)]
    unaligned = (base[1:101], base[4:104])  # 4 bytes past an aligned address: Triton's JIT specializes
    assert triton_launch._launch_static(launcher, 0, (1,), unaligned) is None
    assert len(rec.calls) == 1
    launcher.static[0] = _Recorder(fail=True)
    with caplog.at_level("WARNING", logger="mend.compiler"):
        assert triton_launch._launch_static(launcher, 0, (1,), aligned) is None
    assert launcher.static[0] is None  # later launches go straight to Triton
    assert any("static launch" in r.message for r in caplog.records)


def test_worker_count(monkeypatch):
    monkeypatch.setenv("MEND_COMPILE_WORKERS", "3")
    assert triton_aot.worker_count() == 3
    monkeypatch.delenv("MEND_COMPILE_WORKERS")
    default = triton_aot.worker_count()
    assert 1 <= default <= 16
    monkeypatch.setenv("MEND_COMPILE_WORKERS", "many")  # a mistyped switch: the default, and a warning naming it
    with pytest.warns(SettingWarning, match="MEND_COMPILE_WORKERS='many': not an integer"):
        assert triton_aot.worker_count() == default


def test_generator_precompiles_only_for_cuda_graphs(monkeypatch):
    submitted = []
    monkeypatch.setattr(triton_aot, "submit", lambda job: submitted.append(job) or triton_aot._LazyFuture(job))
    monkeypatch.setattr(triton_aot, "target_for", lambda dev: SM90)
    x = torch.randn(10)
    gm = make_fx(lambda x: x.exp() + 1, decomposition_table=decomposition_table(), tracing_mode="fake")(x)
    sg = lower_and_schedule(gm, [x], "cuda")
    for device, jobs in ((torch.device("cpu"), 0), (torch.device("cuda"), 1)):
        submitted.clear()
        gen = TritonGenerator(interpret=False)
        gen.device = device
        (launcher, _), = gen.compile(sg.kernels, None).values()
        assert len(submitted) == jobs and len(launcher.aot) == jobs
    assert submitted[0]["fn"] == launcher.source.fn_name and submitted[0]["target"] == SM90
    monkeypatch.setenv("MEND_TRITON_AOT", "0")
    submitted.clear()
    gen.compile(sg.kernels, None)
    assert submitted == []


def test_idle_workers_exit_and_come_back(monkeypatch):
    import time

    monkeypatch.setenv("MEND_COMPILE_WORKERS_IDLE_S", "0.4")
    module, (launcher,) = launchers(lambda x: x.exp() + 1, torch.randn(100))
    sig, cfg = launcher.source.signature(), launcher.plan.configs[0]
    job = triton_aot.job_for(module, launcher.source.fn_name, sig, cfg.constexprs("pointwise"), cfg.options(), SM90)
    assert "error" not in triton_aot.submit(job).result()
    first = triton_aot._pool
    procs = [w.proc for w in first.idle.queue]
    deadline = time.monotonic() + 20
    while triton_aot._pool is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert triton_aot._pool is None and first.closed
    for proc in procs:
        assert proc.wait(timeout=10) is not None  # the worker processes are gone
    assert "error" not in triton_aot.submit(job).result()  # a new pool starts on demand
    assert triton_aot._pool is not None and triton_aot._pool is not first


def test_parse_target():
    from mend.compiler.codegen.triton.worker import parse_target

    assert parse_target("cuda:90:32") == SM90
    assert parse_target("cuda:90") is None and parse_target("cuda:x:32") is None


def test_warm_up_compiles_in_a_throwaway_cache_and_restores_the_environment(tmp_path):
    from mend.compiler.codegen.triton import worker as triton_worker

    assert triton_worker.warm_up(SM90)
    assert os.environ["TRITON_CACHE_DIR"] == str(tmp_path / "triton")
    assert not _cache_entries(tmp_path)  # nothing of the warm-up is left in the user's cache
    assert "mend_warm_kernel" not in __import__("sys").modules


def _one_job(module, launcher):
    cfg = launcher.plan.configs[0]
    return triton_aot.job_for(module, launcher.source.fn_name, launcher.source.signature(),
                              cfg.constexprs(launcher.template), cfg.options(), SM90)


@pytest.mark.slow
def test_workers_warm_up_for_the_target_unless_a_job_is_waiting(monkeypatch):
    import select

    monkeypatch.setenv("MEND_COMPILE_WORKERS", "1")
    module, (launcher,) = launchers(lambda x: torch.relu(x) * 2, torch.randn(64))
    job = _one_job(module, launcher)
    # a job submitted as the pool starts is in the pipe before Triton is imported: compiled at once
    first = triton_aot.submit(job).result()
    assert "error" not in first and first["worker_warmed"] is False
    triton_aot.shutdown()
    # a pool started ahead (as the backend does while aot_autograd traces) warms its idle worker up;
    # the worker says it is ready once the warm-up is done
    p = triton_aot.pool(SM90)
    assert select.select([p.idle.queue[0].proc.stdout], [], [], 120)[0]
    res = triton_aot.submit(job).result()
    assert "error" not in res and res["worker_warmed"] is True


def _key_in_fresh_process(store) -> dict:
    import json
    import subprocess
    import sys

    code = ("import json, sys; sys.path[:1] = []; import runpy; "
            f"w = runpy.run_path({str(triton_aot.WORKER)!r}); "
            f"key = w['remembered_triton_key']({str(store)!r}); "
            "from triton.runtime import cache as rc; "
            "print(json.dumps({'key': key, 'installed': rc.triton_key.__name__ == 'triton_key' "
            "and rc.triton_key.__module__ != 'triton.runtime.cache', 'value': rc.triton_key()}))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_tritons_own_cache_key_is_remembered_across_worker_processes(tmp_path):
    import json

    from triton.runtime.cache import triton_key

    store = tmp_path / "triton_key.json"
    first = _key_in_fresh_process(store)  # computed, remembered
    assert first["key"] == triton_key() and not first["installed"]
    saved = json.loads(store.read_text())
    assert saved["key"] == triton_key() and len(saved["stamp"]) == 64
    second = _key_in_fresh_process(store)  # reused without hashing libtriton, installed as Triton's
    assert second["installed"] and second["key"] == second["value"] == triton_key()
    # anything Triton's key depends on changes (here: the stamp no longer matches): computed again
    store.write_text(json.dumps({"stamp": "0" * 64, "key": "stale"}))
    third = _key_in_fresh_process(store)
    assert third["key"] == triton_key() and not third["installed"]
    assert json.loads(store.read_text())["key"] == triton_key()


def test_workers_are_told_where_to_remember_the_key(monkeypatch, tmp_path):
    env = triton_aot._worker_env()
    assert env["MEND_TRITON_KEY_FILE"].startswith(str(tmp_path / "mend"))
    monkeypatch.setenv("MEND_DISABLE_CACHE", "1")
    assert "MEND_TRITON_KEY_FILE" not in triton_aot._worker_env()


# ----------------------------------------------------------- matrix products tuned in the background


class _Future:
    """A compile job that finishes when the test says so."""

    def __init__(self):
        self.finished = False

    def done(self):
        return self.finished

    def result(self, timeout=None):
        if not self.finished:
            from concurrent.futures import TimeoutError

            raise TimeoutError
        return {"error": "stand-in"}


def _matmul_launcher():
    import torch.nn.functional as F

    bf = torch.bfloat16
    x, w, b = torch.empty(4096, 768, dtype=bf), torch.empty(3072, 768, dtype=bf), torch.empty(3072, dtype=bf)
    gm = make_fx(lambda x, w, b: F.gelu(F.linear(x, w, b)), decomposition_table=decomposition_table(),
                 tracing_mode="fake")(x, w, b)
    sg = lower_and_schedule(gm, [x, w, b], "cuda")
    (s,) = TritonGenerator(interpret=False).sources(sg.kernels)[0]
    assert s.plan.template == "matmul" and len(s.plan.configs) > 1
    module = triton_build.load_module(render_module([s], interpret=False))
    return module, triton_launch.TritonMatmulLauncher(s.k, getattr(module, s.fn_name),
                                                     getattr(module, s.epilogue.fn_name), s)


@pytest.fixture
def lazy_matmul(monkeypatch):
    """A bfloat16 product with a GELU epilogue whose launcher believes it runs on a GPU: what it submits,
    launches and times is recorded instead."""
    module, launcher = _matmul_launcher()
    log = {"submitted": [], "background": [], "launched": [], "tuned": 0}
    futures = []

    def submit(job):
        log["submitted"].append(job["fn"])
        return _Future()

    def submit_background(job):
        log["background"].append(job["fn"])
        futures.append(_Future())
        return futures[-1]

    def tune(tensors, dev):
        log["tuned"] += 1
        return launcher.plan.configs[1]

    monkeypatch.setattr(triton_aot, "submit", submit)
    monkeypatch.setattr(triton_aot, "submit_background", submit_background)
    monkeypatch.setattr(launcher, "_autotuned", lambda dev: True)
    monkeypatch.setattr(launcher, "_tune", tune)
    monkeypatch.setattr(launcher, "launch", lambda cfg, tensors: log["launched"].append(cfg))
    launcher.precompile(module, SM90, torch.device("cpu"))
    return launcher, log, futures


def test_a_matmul_kernel_runs_cublas_until_its_fused_configurations_are_built(lazy_matmul):
    launcher, log, futures = lazy_matmul
    fused, epilogue = launcher.source.fn_name, launcher.source.epilogue.fn_name
    # ahead of the first launch: the epilogue kernel only (cuBLAS's partner), no fused configuration
    assert log["submitted"] and set(log["submitted"]) == {epilogue}
    launcher()
    assert log["launched"] == [triton_launch.CUBLAS]
    assert log["background"] == [fused] * len(launcher.plan.configs)
    launcher()
    assert log["launched"][-1] is triton_launch.CUBLAS and log["tuned"] == 0  # still compiling
    assert not triton_launch.wait_tuning(timeout=0)
    for f in futures:
        f.finished = True
    assert triton_launch.wait_tuning(timeout=0)
    launcher()  # everything built: this call times the candidates and switches
    assert log["tuned"] == 1 and log["launched"][-1] == launcher.plan.configs[1]
    launcher()
    assert log["tuned"] == 1 and log["launched"][-1] == launcher.plan.configs[1]
    assert log["background"] == [fused] * len(launcher.plan.configs)  # nothing submitted twice


def test_settle_finishes_the_tuning_at_the_next_call(lazy_matmul):
    """What a CUDA graph capture asks first: the captured graph keeps the configurations it records."""
    launcher, log, _ = lazy_matmul
    launcher()
    launcher.settle()
    launcher()
    assert log["tuned"] == 1 and log["launched"] == [triton_launch.CUBLAS, launcher.plan.configs[1]]


def test_without_background_workers_or_when_switched_off_the_first_launch_tunes(lazy_matmul, monkeypatch):
    launcher, log, _ = lazy_matmul
    monkeypatch.setattr(triton_aot, "submit_background", lambda job: None)  # no compile workers
    launcher()
    assert log["tuned"] == 1 and log["launched"] == [launcher.plan.configs[1]]
    module, again = _matmul_launcher()
    monkeypatch.setenv("MEND_MATMUL_LAZY_TUNE", "0")
    log["submitted"].clear()
    again.precompile(module, SM90, torch.device("cpu"))
    assert log["submitted"].count(again.source.fn_name) == len(again.plan.configs)  # every one, ahead


def test_background_jobs_compile_in_the_pool_and_need_one(monkeypatch):
    module, (launcher,) = launchers(lambda x: torch.relu(x) * 3, torch.randn(64, 32))
    cfg = launcher.plan.configs[0]
    job = triton_aot.job_for(module, launcher.source.fn_name, launcher.source.signature(),
                             cfg.constexprs("pointwise"), cfg.options(), SM90)
    res = triton_aot.submit_background(job).result(timeout=300)
    assert "error" not in res and os.path.exists(res["cubin_path"])
    triton_aot.shutdown()
    monkeypatch.setenv("MEND_COMPILE_WORKERS", "0")
    assert triton_aot.submit_background(job) is None  # no pool: the launcher tunes at its first launch


def test_the_worker_protocol_is_data_never_a_pickle(tmp_path):
    import io
    import pickle
    import struct

    from mend.compiler.codegen.triton import worker as triton_worker

    job = {"path": "/k.py", "module": "k", "fn": "f", "signature": {"x": "*fp32", "B": "constexpr"},
           "constexprs": {"B": 128, "EVEN": True, "SCALE": 0.5, "NONE": None}, "options": {"num_warps": 4},
           "target": ("cuda", 90, 32)}
    assert triton_worker.decode_frame(triton_worker.encode_frame(job)) == job
    result = {"name": "f", "cubin": b"\x00\x7fELF", "arg_types": ["*fp32"], "shared": 0}
    assert triton_worker.decode_frame(triton_worker.encode_frame(result)) == result

    class Sentinel:
        def __reduce__(self):
            return (open, (str(tmp_path / "pwned"), "w"))

    frame = pickle.dumps(Sentinel())
    stream = io.BytesIO(struct.pack("<I", len(frame)) + frame)
    with pytest.raises(ValueError):
        triton_worker._read(stream)
    assert not (tmp_path / "pwned").exists()
    for bad in (b'{"@x": 1}', b'{"@b": 3}', b"[", b"\xff"):
        with pytest.raises(ValueError):
            triton_worker.decode_frame(bad)
