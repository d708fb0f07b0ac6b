"""The autotuner times the GPU alone: each timing run queues a GPU sleep first, so a candidate whose launch
costs more host time than its kernels run (cuBLAS through torch, then the epilogue kernel) is not timed at
its host speed. Checked without a GPU: the CUDA calls are stand-ins that record their order."""

from __future__ import annotations

import pytest
import torch

from mend.compiler.codegen.triton import launch


class _Event:
    def __init__(self, log, times):
        self.log, self.times = log, times

    def record(self):
        self.log.append("record")

    def synchronize(self):
        self.log.append("sync")

    def elapsed_time(self, other):
        return self.times.pop(0)


def test_each_timing_run_queues_a_sleep_before_its_launches(monkeypatch):
    log: list = []
    times = [5.0, 3.0, 4.0]
    monkeypatch.setattr(torch.cuda, "Event", lambda enable_timing: _Event(log, times))
    monkeypatch.setattr(torch.cuda, "_sleep", lambda cycles: log.append(("sleep", cycles)))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: log.append("synchronize"))
    launcher = launch.TritonLauncher.__new__(launch.TritonLauncher)
    launcher.launch = lambda cfg, tensors: log.append("launch")

    best = launch.TritonLauncher._time(launcher, "cfg", [], reps=2)
    assert best == pytest.approx(3.0 / 2)  # the best run, per launch
    run = [("sleep", launch.SLEEP_CYCLES), "record", "launch", "launch", "record", "sync"]
    assert log == ["launch", "synchronize", *run, *run, *run]
    assert launch.SLEEP_CYCLES >= 1_000_000  # about 0.5 ms or more at any clock: room for the host to queue
