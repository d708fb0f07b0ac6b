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
    """Runs rows of one source of one suite in this process."""

    def __init__(self, source: str, out: Path, dtype: str, profile: str, backend: str, device: str,
                 suite: str = "transformers", root: str | None = None) -> None:
        import torch

        from benchmarks.zoo.suites import load

        self.torch = torch
        self.source, self.out, self.dtype, self.profile_name = source, out, dtype, profile
        self.backend, self.device = backend, device
        self.suite = load(suite, root)
        self.tf_dir = self.suite.root  # the folder whose files are the project (the package, the checkouts)
        (out / source).mkdir(parents=True, exist_ok=True)

    def _seeded(self, fn: Any) -> Any:
        from benchmarks.zoo.train import seed_all

        seed_all(1234)
        return fn()

    def _backend(self) -> Any:
        if self.backend == "eager":
            from mend.analyzers.runtime import counting_backend

            return counting_backend()
        return self.backend

    def run(self, name: str, mode: str = "eval") -> R.Record:
        rec = R.Record(name=name, model_type=name.partition(":")[0], variant=name.partition(":")[2],
                       source=self.source, dtype=self.dtype, profile=self.profile_name, transformers=self.tf_dir,
                       mode=mode)
        t0 = time.perf_counter()
        try:
            self._run(name, rec)
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

    def _observe(self) -> Any:
        from benchmarks.zoo.observe import Observer

        reset = getattr(self.suite, "reset_messages", None)
        if reset is not None:
            reset()
        return Observer([self.tf_dir])

    def _step(self, model: Any, case: Any, mode: str, rec: R.Record) -> list:
        """One seeded eager step: the flattened output (training: output, loss, gradients)."""
        from benchmarks.zoo.compare import flatten

        if mode == "eval":
            with self.torch.no_grad():
                return flatten(self._seeded(lambda: case.call(model)))
        from benchmarks.zoo.train import loss_of, step_tensors

        def step() -> list:
            out = case.call(model)
            got = (case.loss or loss_of)(out)
            loss, rec.loss_kind = got if isinstance(got, tuple) else (got, "driver")
            loss.backward()
            return step_tensors(out, loss, model)

        return self._seeded(step)

    def _run(self, name: str, rec: R.Record) -> None:
        from benchmarks.zoo.compare import compare

        mode = rec.mode
        stage = "build"
        try:
            case = self._stage(rec, "build", lambda: self.suite.case(name, mode, self.dtype, self.profile_name))
            rec.model_class, rec.note = case.model_class, case.note
            stage = "inputs"
            case.model = case.model.to(self.device)
            case.args, case.kwargs = _to_device(case.args, self.device), _to_device(case.kwargs, self.device)
            stage = "eager"
            eager, fresh = self._eager(case, mode, rec)
        except Exception as exc:  # the row's failure is its result
            rec.status, rec.error = _status_of(stage, exc, self.dtype), last_line(exc)
            return
        compiled = self._compile(fresh, case, rec)
        if compiled is not None:
            diff = compare(eager, compiled)
            rec.compiled_max_abs_diff, rec.compiled_matches = diff.max_abs_diff, diff.close
            rec.compiled_note = diff.note
            if mode == "train":
                g = compare([t for t in eager if t[0].startswith("grad.")],
                            [t for t in compiled if t[0].startswith("grad.")])
                rec.compiled_grads_max_abs_diff, rec.compiled_grads_match = g.max_abs_diff, g.close
        path = self.out / self.source / f"{rec.name.replace(':', '--')}{'' if mode == 'eval' else '--' + mode}.pt"
        # only what the sources are compared on afterwards (eager outputs, loss, gradients): the compiled step
        # is compared here, and keeping it doubled the disk a suite needs (timm in training filled 64 GB)
        self.torch.save({"eager": eager}, path)
        rec.outputs = str(path)

    def _eager(self, case: Any, mode: str, rec: R.Record) -> tuple[list, Any]:
        """Two seeded eager steps (the first under the line recorder and the message observer); the model as
        built, for the compiled step. Training: each step on its own copy; a row whose labelled head raises
        runs its fallback (the base model with the outputs' loss)."""
        try:
            return self._eager_steps(case, mode, rec)
        except Exception as exc:
            if case.fallback is None:
                raise
            note = f"{case.model_class} raised in eager ({last_line(exc)[:120]})"
            fallback = case.fallback()
            case.model, case.args, case.kwargs = fallback.model.to(self.device), fallback.args, fallback.kwargs
            case.kwargs = _to_device(case.kwargs, self.device)
            case.model_class, case.loss, case.fallback = fallback.model_class, fallback.loss, None
            rec.model_class = case.model_class
            rec.note = f"{note}; {fallback.note or case.model_class + ' with the outputs' + chr(39) + ' loss'}"
            return self._eager_steps(case, mode, rec)

    def _eager_steps(self, case: Any, mode: str, rec: R.Record) -> tuple[list, Any]:
        from benchmarks.zoo.compare import compare
        from benchmarks.zoo.train import rng_digest

        rec.params = sum(t.numel() for t in case.model.parameters())
        fresh = _copy(case.model)
        first = _copy(case.model) if mode == "train" else case.model
        with LineRecorder(self.tf_dir) as ran, self._observe() as seen:
            eager = self._stage(rec, "eager", lambda: self._step(first, case, mode, rec))
        rec.lines, rec.messages["eager"] = ran.ranges(), seen.messages
        rec.rng = rng_digest()
        second = _copy(case.model) if mode == "train" else case.model
        again = self._stage(rec, "eager_again", lambda: self._step(second, case, mode, rec))
        rec.eager_deterministic = compare(eager, again).same
        return eager, fresh

    def _compile(self, model: Any, case: Any, rec: R.Record) -> list | None:
        from mend.analyzers.runtime.recorder import Recorder

        train = rec.mode == "train"
        t0 = time.perf_counter()
        compiled = None
        if train:
            from benchmarks.zoo.train import TrainBackend

            backend = TrainBackend() if self.backend == "eager" else self.backend
        else:
            backend = self._backend()
        # track_lines: the functions Dynamo traced are recorded too (what a static finding can be scored on)
        with Recorder(source=[self.tf_dir], root=self.tf_dir, fast=self.backend == "eager" and not train,
                      track_lines=True) as run, self._observe() as seen:
            try:
                compiled = self._step(self.torch.compile(model, backend=backend), case, rec.mode, rec)
                if train:  # the gradients are the parameters' (the compiled module shares them)
                    from benchmarks.zoo.train import grads

                    compiled = [t for t in compiled if not t[0].startswith("grad.")] + grads(model)
            except Exception as exc:
                rec.status, rec.error = R.COMPILE_ERROR, last_line(exc)
        rec.messages["compiled"] = seen.messages
        rec.seconds["compile"] = round(time.perf_counter() - t0, 3)
        if hasattr(backend, "backward_graphs"):
            rec.backward_graphs = backend.backward_graphs
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
        line = line.strip()
        if not line:
            continue
        mode, _, name = line.rpartition("\t")  # "MODE<TAB>ROW" or a bare row (eval)
        rec = runner.run(name, mode or "eval")
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
    ap.add_argument("--suite", default="transformers", help="transformers, torchvision, timm, diffusers, "
                    "torch_geometric or repos")
    ap.add_argument("--root", help="repos: the folder of checkouts this source runs")
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
    runner = Runner(a.source, a.out, a.dtype, a.profile, a.backend, a.device, a.suite, a.root)
    reply.write(json.dumps({"ready": runner.tf_dir}) + "\n")
    reply.flush()
    serve(runner, sys.stdin, reply)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
