"""The benchmark worker: one process per (variant, backend), driven over a line protocol.

``python -m mend.bench.worker`` reads one JSON line of configuration on stdin, then commands
(one JSON line each) and answers each with one JSON line on the protocol stream. The protocol stream is
the process's original stdout; the worker points file descriptor 1 at stderr first, so whatever the
user's code prints lands in the worker log and never corrupts the protocol.

Phases, each answered with an event:

* start-up (no command): import torch, load the harness, move it to the device -> ``loaded``
* ``{"cmd": "cold"}``: compile, time the first call, warm up until the times are stable -> ``ready``
* ``{"cmd": "round", "calls": N}``: N timed calls -> ``round`` with the times in seconds
* ``{"cmd": "finish"}``: final counts and peak memory -> ``finished``; the process exits

Any failure answers ``{"event": "error", "phase": ..., "error": ..., "traceback": ...}`` and exits.
The driver (``runner.py``) gives each worker fresh compile caches through the environment.
"""

from __future__ import annotations

import json
import os
import platform
import re
import resource
import sys
import time
import traceback
from typing import Any

from mend import settings
from mend.analyzers.paths import is_under
from mend.analyzers.runtime import harness as harness_mod
from mend.analyzers.runtime.harness import HarnessError
from mend.bench import stats
from mend.rewriter.helper_module import TREE_MODULE

# name -> (torch.compile backend or None for plain eager PyTorch, mode)
BACKENDS: dict[str, tuple[str | None, str | None]] = {
    "eager": (None, None),
    "dynamo-eager": ("eager", None),
    "aot_eager": ("aot_eager", None),
    "inductor": ("inductor", None),
    "inductor-reduce-overhead": ("inductor", "reduce-overhead"),
    "inductor-max-autotune": ("inductor", "max-autotune-no-cudagraphs"),
    "mend": ("mend", None),
    "mend-reduce-overhead": ("mend", "reduce-overhead"),
}


def backend_spec(name: str) -> tuple[str | None, str | None]:
    """``(torch.compile backend, mode)`` for a bench backend name; unknown names are Dynamo backends."""
    return BACKENDS.get(name, (name, None))


class BackendUnavailable(Exception):
    """A backend that cannot be loaded in this process; the message says why."""


def resolve_backend(name: str) -> str:
    """Check that a Dynamo backend can be loaded; raise :class:`BackendUnavailable` if not."""
    from mend.analyzers.runtime import compat

    if name == "mend":
        try:
            import mend.compiler.backend  # noqa: F401  (the bundled compiler registers the backend)
        except Exception as exc:
            raise BackendUnavailable(f"the bundled compiler is not importable ({type(exc).__name__}: {exc})") from exc
    try:
        compat.lookup_backend(name)
    except Exception as exc:
        known = ", ".join(compat.backend_names())
        raise BackendUnavailable(f"backend {name!r} cannot be loaded ({type(exc).__name__}: {exc}); known: {known}") from exc
    return name


def recompiles(compilations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Compilations that are a second or later compile of the same frame (compile id ``F/N``, N > 0)."""
    out = []
    for c in compilations:
        m = re.search(r"(\d+)/(\d+)", c["compile_id"] or "")
        if m and int(m.group(2)) > 0:
            out.append(c)
    return out


def _cudagraph_step() -> None:
    import torch

    mark = getattr(torch.compiler, "cudagraph_mark_step_begin", None)
    if mark is not None:
        mark()


class _Proto:
    def __init__(self) -> None:
        fd = os.dup(1)
        os.dup2(2, 1)  # the user's prints go to the log, not into the protocol
        sys.stdout = sys.stderr
        self._out = os.fdopen(fd, "w", buffering=1)

    def send(self, event: str, **data: Any) -> None:
        self._out.write(json.dumps({"event": event, **data}) + "\n")
        self._out.flush()

    @staticmethod
    def receive() -> dict[str, Any]:
        line = sys.stdin.readline()
        if not line:
            raise SystemExit(0)  # the driver went away
        return json.loads(line)


def _maxrss_bytes() -> int:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return int(rss if sys.platform == "darwin" else rss * 1024)


def _first_batch(args: tuple, kwargs: dict) -> int:
    import torch

    for value in (*args, *kwargs.values()):
        if isinstance(value, torch.Tensor):
            return int(value.shape[0]) if value.dim() > 0 else 1
    return 1


def _convert(obj: Any, device: str, dtype: Any) -> Any:
    import torch

    if isinstance(obj, torch.nn.Module):
        obj = obj.to(device)
        return obj.to(dtype) if dtype is not None else obj
    if isinstance(obj, torch.Tensor):
        if dtype is not None and obj.is_floating_point():
            return obj.to(device=device, dtype=dtype)
        return obj.to(device)
    if isinstance(obj, tuple):
        return tuple(_convert(v, device, dtype) for v in obj)
    if isinstance(obj, list):
        return [_convert(v, device, dtype) for v in obj]
    if isinstance(obj, dict):
        return {k: _convert(v, device, dtype) for k, v in obj.items()}
    return obj


class Worker:
    def __init__(self, cfg: dict[str, Any], proto: _Proto) -> None:
        self.cfg = cfg
        self.proto = proto
        self.phase = "load"

    # -- phases -------------------------------------------------------------------------------------
    def load(self) -> None:
        import torch

        cfg = self.cfg
        if cfg.get("threads"):
            torch.set_num_threads(int(cfg["threads"]))
        torch.manual_seed(int(cfg.get("seed", 0)))
        self.device = cfg["device"]
        self.cuda = self.device.startswith("cuda")
        dtype = getattr(torch, cfg["dtype"]) if cfg.get("dtype") else None
        os.environ[settings.BENCH_DEVICE.name] = self.device  # harnesses may read it to build on the device
        search = list(cfg.get("search") or [])
        harness_mod.record_module_code()
        h = harness_mod.load(harness_mod.parse_spec(cfg["harness"]), search_path=search)
        self.shadowed, self.tree = _check_tree(cfg)
        from mend.analyzers.runtime import compat

        target, self.unwrapped = compat.unwrap_compiled(h.target)
        self.target = _convert(target, self.device, dtype)
        self.args = _convert(h.args, self.device, dtype)
        self.kwargs = _convert(h.kwargs, self.device, dtype)
        self.batch = int(cfg.get("batch") or _first_batch(self.args, self.kwargs))
        self.backend, self.mode = backend_spec(cfg["backend"])
        self.grad = bool(cfg.get("grad"))
        self.counter = compat.DynamoCounts()
        self.compat = compat
        self.recorder_cm = None
        self.recorder = None
        if self.backend is not None:
            try:
                from mend.analyzers.runtime import record
            except ImportError:
                record = None
            if record is not None:
                self.recorder_cm = record(source=_project_dirs(cfg, target, search))
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.baseline_mem = int(torch.cuda.memory_allocated())
        else:
            self.baseline_mem = _maxrss_bytes()
        self.proto.send(
            "loaded",
            batch=self.batch,
            unwrapped=self.unwrapped,
            shadowed=self.shadowed[:50],
            tree=self.tree,
            torch_version=torch.__version__,
            device_name=torch.cuda.get_device_name() if self.cuda else _cpu_name(),
        )

    def _sync(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()

    def _call_once(self, keep: list[Any] | None = None) -> float:
        import torch

        fn = self.fn
        ctx = torch.enable_grad() if self.grad else torch.no_grad()
        if self.mode == "reduce-overhead":
            _cudagraph_step()
        self._sync()
        with ctx:
            t0 = time.perf_counter()
            out = fn(*self.args, **self.kwargs)
            self._sync()
            t1 = time.perf_counter()
        if keep is not None:
            keep.append(_output_tensors(out))
        del out
        return t1 - t0

    def cold(self, reference: str | None = None) -> None:
        import torch

        self.phase = "compile"
        if self.backend is None:
            self.fn = self.target
        else:
            resolve_backend(self.backend)
            kwargs: dict[str, Any] = {"backend": self.backend}
            if self.mode:
                kwargs["mode"] = self.mode
            self.compat.reset_dynamo()
            self.fn = torch.compile(self.target, **kwargs)
        self.counter.start()
        if self.recorder_cm is not None:
            self.recorder = self.recorder_cm.__enter__()
        self.phase = "first call"
        kept: list[Any] = []
        first = self._call_once(keep=kept)
        compile_cold = self.counter.compile_seconds()
        self.phase = "output check"
        check = self._check_output(kept[0], reference)
        warmup = self.warm_up()
        self.proto.send(
            "ready", first_call_s=first, compile_s=compile_cold, output_check=check, warmup=warmup, **self._counts()
        )

    def warm_up(self) -> dict[str, Any]:
        """``warmup`` calls; then, for mend, wait for its background builds (graphs compiled with
        ``async_compile``, matrix products tuning) and make the call that switches to them; then batches of
        calls until two batches in a row agree (``stats.until_stable``)."""
        self.phase = "warm-up"
        for _ in range(int(self.cfg.get("warmup", 3))):
            self._call_once()
        compiler = sys.modules.get("mend.compiler") if self.backend == "mend" else None
        if compiler is not None:
            self.phase = "waiting for mend's background compiles"
            compiler.wait()
            self._call_once()
        self.phase = "warm-up"
        if float(self.cfg.get("warmup_max_s", 0.0)) <= 0:
            return {"calls": 0, "stable": None, "median_s": None}
        return stats.until_stable(
            self._call_once, tol=float(self.cfg.get("stable_tol", 0.03)), max_s=float(self.cfg["warmup_max_s"])
        )

    def _check_output(self, tensors: list[Any], reference: str | None) -> dict[str, Any] | None:
        """Save this worker's first output; compare it with the reference worker's saved output."""
        import torch

        torch.save(tensors, self.cfg["output_path"])
        if reference is None:
            return None
        try:
            ref = torch.load(reference)
        except (OSError, RuntimeError) as exc:
            return {"matches": False, "max_abs_diff": None, "detail": f"reference output unreadable: {exc}"}
        return compare_outputs(tensors, ref)

    def round(self, calls: int) -> None:
        self.phase = "timed run"
        times = [self._call_once() for _ in range(calls)]
        self.proto.send("round", times=times)

    def finish(self) -> None:
        import torch

        self.counter.stop()
        if self.recorder_cm is not None:
            self.recorder_cm.__exit__(None, None, None)
        if self.cuda:
            mem = {"kind": "cuda_max_memory_allocated", "bytes": int(torch.cuda.max_memory_allocated())}
        else:
            mem = {"kind": "rss_high_water", "bytes": _maxrss_bytes()}
        mem["baseline_bytes"] = self.baseline_mem
        self.proto.send(
            "finished", compile_total_s=self.counter.compile_seconds(), peak_memory=mem, **self._counts()
        )

    def _counts(self) -> dict[str, Any]:
        if self.backend is None:
            return {"counted_by": None, "graphs": None, "breaks": None, "break_events": None, "frames_skipped": None,
                    "recompiles": None, "break_sites": [], "recompile_reasons": []}
        if self.recorder is not None:
            return self._recorder_counts()
        events = self.counter.break_events
        sites: dict[tuple[str, int, str], int] = {}
        for e in events:
            key = (e.file, e.line, e.reason)
            sites[key] = sites.get(key, 0) + 1
        rec = recompiles(self.counter.compilations())
        reasons = [r["recompile_reason"] for r in rec if r["recompile_reason"]]
        return {
            "counted_by": "dynamo-logs",
            "graphs": self.counter.graphs(),
            "breaks": len(sites),
            "break_events": len(events),
            "frames_skipped": self.counter.frames_skipped(),
            "recompiles": len(rec),
            "break_sites": [
                {"file": f, "line": ln, "reason": r, "registry_id": self.compat.registry_id(r), "count": n}
                for (f, ln, r), n in sorted(sites.items())
            ],
            "recompile_reasons": [r.splitlines()[0][:300] for r in reasons[:20]],
        }


    def _recorder_counts(self) -> dict[str, Any]:
        """Counts from mend's runtime recorder (the same numbers ``mend run`` reports)."""
        rec = self.recorder
        breaks = rec.breaks
        recompiles = rec.recompiles
        return {
            "counted_by": "mend.analyzers.runtime",
            "graphs": rec.graphs,
            "breaks": len(breaks),
            "break_events": sum(b.count for b in breaks),
            "frames_skipped": sum(1 for b in breaks if b.frame_skip),
            "recompiles": sum(r.count for r in recompiles),
            "break_sites": [
                {"file": b.path, "line": b.line, "reason": b.gb_type, "registry_id": b.registry_id, "count": b.count}
                for b in breaks
            ],
            "recompile_reasons": [(r.guard or r.reason).splitlines()[0][:300] for r in recompiles if (r.guard or r.reason)][:20],
        }


def _check_tree(cfg: dict[str, Any]) -> tuple[list[str], dict[str, str]]:
    """Which files the harness imported from the repaired folder (``cfg["tree"]``, given to both variants),
    and which file each module that folder holds was imported from. The repaired variant
    (``cfg["fixed"]``) must import something from the folder and every such module from it; the original
    variant none of them from it."""
    if not cfg.get("tree"):
        return [], {}
    root = os.path.realpath(cfg["tree"])
    inside, tree = harness_mod.tree_modules(root)
    # the repaired tree's helper module (``_mend.py``, written by mend fix) is no evidence either way: the
    # original has none, and loading it alone runs no repaired code
    inside = [f for f in inside if os.path.basename(f) != f"{TREE_MODULE}.py"]
    tree = {n: f for n, f in tree.items() if n.rpartition(".")[2] != TREE_MODULE}
    outside = {n: f for n, f in tree.items() if not is_under(f, root)}
    if cfg.get("fixed") and not inside:
        raise HarnessError(
            f"--fixed {cfg['fixed']}: the harness imported nothing from that folder, so the "
            "'repaired' variant would run the original code. Point --fixed at the folder that "
            "holds the repaired modules (it is put first on sys.path) or the repaired harness file.")
    if cfg.get("fixed") and outside:
        raise HarnessError(
            f"--fixed {cfg['fixed']}: the 'repaired' variant imported "
            + ", ".join(f"{n} from {f}" for n, f in sorted(outside.items()))
            + ", not the repaired copy in that folder, so it would run original code")
    if not cfg.get("fixed") and len(outside) != len(tree):
        raise HarnessError(
            f"the original variant imported {', '.join(sorted(set(tree) - set(outside)))} from the "
            f"repaired folder {cfg['tree']}, so it would not run the original code")
    return inside, tree


def _project_dirs(cfg: dict[str, Any], target: Any, search: list[str]) -> list[str]:
    """Folders whose files count as the user's code for break attribution: the harness, the repaired
    copy, and the top-level package that defines the model (e.g. transformers), so that a break inside
    a library model is reported at its own line."""
    dirs = [os.path.dirname(os.path.abspath(cfg["harness"].rpartition(":")[0])), *search]
    import torch

    module = type(target).__module__ if isinstance(target, torch.nn.Module) else getattr(target, "__module__", None)
    top = (module or "").split(".")[0]
    mod = sys.modules.get(top)
    path = getattr(mod, "__file__", None) if mod else None
    if path and os.path.basename(path) == "__init__.py":
        dirs.append(os.path.dirname(path))
    return [d for d in dict.fromkeys(dirs) if d]


# (rtol, atol) for comparing a row's first output with the reference (original variant, first backend)
TOLERANCES = {"float32": (1e-3, 1e-4), "float16": (1e-2, 1e-2), "bfloat16": (5e-2, 5e-2)}
HALF = ("float16", "bfloat16")


def compare_outputs(tensors: list[Any], ref: list[Any]) -> dict[str, Any]:
    """Each output tensor against the reference's, with the tolerance of its own dtype (:data:`TOLERANCES`;
    others compare as float32): float32 and wider element by element (``allclose``); float16 and bfloat16
    against the output's scale, ``max |a - b| <= atol + rtol * max |b|``, since two compilers' roundings of
    the same half-precision program differ by an ulp or two anywhere, near zero too. Non-finite values
    must sit at the same places."""
    import torch

    result: dict[str, Any] = {"matches": True, "max_abs_diff": 0.0, "rtol": 0.0, "atol": 0.0, "detail": ""}
    if len(ref) != len(tensors):
        return {**result, "matches": False, "max_abs_diff": None,
                "detail": f"{len(tensors)} output tensors, the reference has {len(ref)}"}
    for i, (a, b) in enumerate(zip(tensors, ref)):
        if a.shape != b.shape:
            return {**result, "matches": False, "max_abs_diff": None,
                    "detail": f"output {i}: shape {tuple(a.shape)}, the reference has {tuple(b.shape)}"}
        if a.numel() == 0:
            continue
        kind = str(b.dtype).removeprefix("torch.")
        rtol, atol = TOLERANCES.get(kind, TOLERANCES["float32"])
        result["rtol"], result["atol"] = max(result["rtol"], rtol), max(result["atol"], atol)
        if a.is_complex() or b.is_complex():
            a, b = torch.view_as_real(a.to(b.dtype)), torch.view_as_real(b)
        a, b = a.double(), b.double()
        diff = (a - b).abs()
        finite = torch.isfinite(diff)
        same_nonfinite = bool(((~torch.isfinite(a)) == (~torch.isfinite(b))).all())
        d = float(diff[finite].max()) if bool(finite.any()) else 0.0
        result["max_abs_diff"] = max(result["max_abs_diff"], d)
        if kind in HALF:
            scale = float(b[torch.isfinite(b)].abs().max()) if bool(torch.isfinite(b).any()) else 0.0
            close = d <= atol + rtol * scale
        else:
            close = torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True)
        if not same_nonfinite or not close:
            result["matches"] = False
            result["detail"] = result["detail"] or f"output {i} differs (max abs diff {d:.3g})"
    return result


def _output_tensors(out: Any) -> list[Any]:
    """The floating and integer tensors of an output (tensor, tuple, list, dict, ModelOutput), on the CPU."""
    import torch

    found: list[Any] = []

    def walk(o: Any) -> None:
        if isinstance(o, torch.Tensor):
            found.append(o.detach().to("cpu"))  # in its own dtype: the comparison's tolerance depends on it
        elif isinstance(o, dict):
            for v in o.values():
                walk(v)
        elif isinstance(o, (tuple, list)):
            for v in o:
                walk(v)

    walk(out)
    return found


def _cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def main() -> None:
    proto = _Proto()
    worker: Worker | None = None
    try:
        cfg = json.loads(sys.stdin.readline() or "{}")
        worker = Worker(cfg, proto)
        worker.load()
        while True:
            msg = proto.receive()
            cmd = msg.get("cmd")
            if cmd == "cold":
                worker.cold(msg.get("reference"))
            elif cmd == "round":
                worker.round(int(msg.get("calls", 1)))
            elif cmd == "finish":
                worker.finish()
                break
            else:
                raise ValueError(f"unknown command {cmd!r}")
    except SystemExit:
        raise
    except BaseException as exc:  # report every failure to the driver, including the user's
        kind = "unavailable" if isinstance(exc, BackendUnavailable) else "error"
        harness_error = isinstance(exc, HarnessError)
        text = str(exc) if kind == "unavailable" or harness_error else f"{type(exc).__name__}: {exc}"
        proto.send(
            kind,
            harness_error=harness_error,
            phase=worker.phase if worker else "load",
            error=text,
            traceback="".join(traceback.format_exception(exc))[-4000:],
        )
        sys.stderr.flush()
        os._exit(0)


if __name__ == "__main__":
    main()
