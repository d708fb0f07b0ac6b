"""The zoo's worker process: serves rows of one source in sequence (torch imported once).

    python -m benchmarks.zoo.worker --source NAME --out DIR [--dtype fp32] [--profile tiny] [--backend eager]

Protocol: one row name per line on stdin; one JSON record per line back on the original stdout. The model's
own printing goes to stderr (fd 1 is pointed there), so it never mixes with the protocol. The worker runs
with the ``PYTHONPATH`` of its source, so ``import transformers`` finds the source's copy (source ``hook``:
the installed package through mend's import hook); the record says which folder it imported.

Per row: build (seeded), inputs, a copy of the model as built, two eager forwards (seeded; are they the same
bits? the first records the package's lines that ran, :mod:`benchmarks.zoo.lines`), one forward of
``torch.compile(copy, backend=...)`` under mend's recorder (the copy: a model whose forward changes its own
state, such as BigBird switching to full attention for a short input, or a rotary cache growing, meets the
compiler as a user's fresh model would; the model itself where it cannot be copied) (breaks are decided by Dynamo, not the backend;
the default ``eager`` backend runs each graph as captured), outputs saved to ``DIR/SOURCE/NAME.pt``.
``torch._dynamo.reset()`` runs between rows.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

from benchmarks.zoo import records as R  # noqa: E402
from benchmarks.zoo.lines import LineRecorder  # noqa: E402
from benchmarks.zoo.reasons import reason_class  # noqa: E402

_DTYPE_HINTS = ("not implemented for 'Half'", "not implemented for 'BFloat16'", '"Half"', '"BFloat16"')


def _to_device(value: Any, device: str) -> Any:
    """``value`` with every tensor in it (also in lists, tuples and dicts) on ``device``."""
    if hasattr(value, "to") and hasattr(value, "device"):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v, device) for v in value)
    if isinstance(value, dict):
        return {k: _to_device(v, device) for k, v in value.items()}
    return value


def last_line(exc: BaseException) -> str:
    """``Type: message`` on one line (a multi-line message joined), at most 300 characters."""
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:300]


def _status_of(stage: str, exc: BaseException, dtype: str) -> str:
    text = str(exc)
    if isinstance(exc, ImportError) or "library but it was not found" in text:
        return R.MISSING_DEPENDENCY
    if dtype != "fp32" and any(h in text for h in _DTYPE_HINTS):
        return R.DTYPE_UNSUPPORTED
    return {"build": R.BUILD_ERROR, "inputs": R.INPUT_ERROR, "eager": R.EAGER_ERROR}[stage]


class Runner:
    """Runs rows for one source in this process."""

    def __init__(self, source: str, out: Path, dtype: str, profile: str, backend: str, device: str) -> None:
        import torch
        import transformers

        self.torch = torch
        self.source, self.out, self.dtype, self.profile_name = source, out, dtype, profile
        self.backend, self.device = backend, device
        self.tf_dir = str(Path(transformers.__file__).resolve().parent)
        (out / source).mkdir(parents=True, exist_ok=True)

    def _forward(self, fn: Any, inputs: dict[str, Any]) -> Any:
        self.torch.manual_seed(1234)
        with self.torch.no_grad():
            return fn(**inputs)

    def _backend(self) -> Any:
        if self.backend == "eager":
            from mend.analyzers.runtime import counting_backend

            return counting_backend()
        return self.backend

    def run(self, name: str) -> R.Record:
        from benchmarks.zoo.specs import spec_by_name

        spec = spec_by_name(name)
        rec = R.Record(name=name, model_type=spec.model_type, variant=spec.variant, source=self.source,
                       dtype=self.dtype, profile=self.profile_name, transformers=self.tf_dir)
        t0 = time.perf_counter()
        try:
            self._run(spec, rec)
        finally:
            rec.seconds["total"] = round(time.perf_counter() - t0, 3)
            self.torch._dynamo.reset()
        return rec

    def _stage(self, rec: R.Record, stage: str, fn: Any) -> Any:
        t0 = time.perf_counter()
        try:
            return fn()
        finally:
            rec.seconds[stage] = round(time.perf_counter() - t0, 3)

    def _run(self, spec: Any, rec: R.Record) -> None:
        from benchmarks.zoo.build import build_model, model_class_name, torch_dtype
        from benchmarks.zoo.compare import compare, flatten
        from benchmarks.zoo.inputs import make_inputs
        from benchmarks.zoo.profiles import profile

        p = profile(self.profile_name)
        stage = "build"
        try:
            rec.model_class = spec.model_class or model_class_name(spec.model_type)
            model, config = self._stage(rec, "build", lambda: build_model(spec, self.dtype, p))
            rec.params = sum(t.numel() for t in model.parameters())
            stage = "inputs"  # made beside the model where it was built (some run a model part to count tokens)
            inputs = self._stage(rec, "inputs", lambda: make_inputs(model, config, spec, p, torch_dtype(self.dtype)))
            model, inputs = model.to(self.device), _to_device(inputs, self.device)
            fresh = _copy(model)
            stage = "eager"
            with LineRecorder(self.tf_dir) as ran:
                eager = self._stage(rec, "eager", lambda: flatten(self._forward(model, inputs)))
            rec.lines = ran.ranges()
            again = self._stage(rec, "eager_again", lambda: flatten(self._forward(model, inputs)))
            rec.eager_deterministic = compare(eager, again).same
        except Exception as exc:  # the row's failure is its result
            rec.status, rec.error = _status_of(stage, exc, self.dtype), last_line(exc)
            return
        compiled = self._compile(fresh, inputs, rec)
        if compiled is not None:
            diff = compare(eager, compiled)
            rec.compiled_max_abs_diff, rec.compiled_matches = diff.max_abs_diff, diff.close
        path = self.out / self.source / f"{rec.name.replace(':', '--')}.pt"
        self.torch.save({"eager": eager, "compiled": compiled}, path)
        rec.outputs = str(path)

    def _compile(self, model: Any, inputs: dict[str, Any], rec: R.Record) -> list | None:
        from benchmarks.zoo.compare import flatten
        from mend.analyzers.runtime.recorder import Recorder

        t0 = time.perf_counter()
        compiled = None
        # track_lines: the functions Dynamo traced are recorded too (what a static finding can be scored on)
        with Recorder(source=[self.tf_dir], root=self.tf_dir, fast=self.backend == "eager", track_lines=True) as run:
            try:
                compiled = flatten(self._forward(self.torch.compile(model, backend=self._backend()), inputs))
            except Exception as exc:
                rec.status, rec.error = R.COMPILE_ERROR, last_line(exc)
        rec.seconds["compile"] = round(time.perf_counter() - t0, 3)
        root = self.tf_dir + os.sep
        rec.traced = sorted([os.path.relpath(f, self.tf_dir), first, last, fn] for f, first, last, fn in run.traced
                            if os.path.realpath(f).startswith(root))
        rec.graphs = run.graphs
        rec.breaks = [R.Break(path=b.path, line=b.line, function=b.function, gb_type=b.gb_type,
                              registry_id=b.registry_id, reason=b.message, count=b.count, frame_skip=b.frame_skip,
                              reason_class=reason_class(b.gb_type, b.message), source_line=b.source_line)
                      for b in run.breaks]
        rec.recompiles = [R.Recompile(path=r.path, line=r.line, function=r.function, kind=r.kind, guard=r.guard,
                                      count=r.count) for r in run.recompiles]
        return compiled


def _copy(model: Any) -> Any:
    """A deep copy of ``model`` as built (same weights), or the model itself where it cannot be copied."""
    import copy

    try:
        return copy.deepcopy(model)
    except Exception:
        return model


def serve(runner: Runner, requests: Any, reply: Any) -> None:
    for line in requests:
        name = line.strip()
        if not name:
            continue
        rec = runner.run(name)
        reply.write(json.dumps(rec.to_dict()) + "\n")
        reply.flush()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="mend zoo worker (spoken to by benchmarks.zoo.runner)")
    ap.add_argument("--source", required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--dtype", default="fp32")
    ap.add_argument("--profile", default="tiny")
    ap.add_argument("--backend", default="eager")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--capture", action="store_true",
                    help="set capture_scalar_outputs and capture_dynamic_output_shape_ops for the whole process")
    a = ap.parse_args(argv)
    reply = os.fdopen(os.dup(1), "w")  # the protocol channel; fd 1 (the model's prints) goes to stderr
    os.dup2(2, 1)
    sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
    warnings.filterwarnings("ignore")  # Dynamo breaks on warnings.warn whether or not it is shown
    if a.source == "hook":  # the installed package, repaired as it is imported (as `mend fix` repairs a copy)
        from mend.imports import repair_imports

        repair_imports(["transformers"], isolated=True, propagate=False)
    import torch

    torch.set_num_threads(a.threads)
    if a.capture:  # what Dynamo's own capture achieves, switched on globally (the baseline mend's repair must beat)
        torch._dynamo.config.capture_scalar_outputs = True
        torch._dynamo.config.capture_dynamic_output_shape_ops = True
    runner = Runner(a.source, a.out, a.dtype, a.profile, a.backend, a.device)
    reply.write(json.dumps({"ready": runner.tf_dir}) + "\n")
    reply.flush()
    serve(runner, sys.stdin, reply)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
