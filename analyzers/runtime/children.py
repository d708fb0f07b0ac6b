"""Graph breaks in the child processes of a recorded program (``multiprocessing`` fork, spawn, forkserver).

While ``mend run`` records, :class:`ChildRecording` makes every child process record too and collects
what they saw:

* a folder for their records (``mkdtemp``, this user's only) is named in ``MEND_RUN_CHILDREN``
  (:data:`ENV_VAR`), and mend's start-up folder is put first on ``PYTHONPATH``, so that a *spawned* Python
  child installs a recorder as soon as it imports torch (:func:`install_from_env`, run by the
  ``sitecustomize`` of :mod:`mend.imports.startup`);
* a *forked* child keeps the recorder it inherits, emptied of its parent's sites (``os.register_at_fork``);
* each child writes its record (``<pid>.json``, a data file) when it starts and again after every event
  (a break, a graph, a compile), so a worker that is killed (``Pool.terminate``) or leaves by ``os._exit``
  loses nothing it saw;
* every ``multiprocessing`` process the program starts is counted by pid: one that left no record was
  not observed (its start-up hook did not run: an isolated interpreter, a cleared environment), and the run
  says so (``RunInfo.unobserved_children``; ``mend gate`` fails on it).

At the end, :meth:`ChildRecording.finish` merges the children's sites into the run's data. Importing this
module does not import torch.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from mend.analyzers.runtime.data import RUNNING, DataFileError, RunData, RunInfo, load, save
from mend.settings import RUN_CHILDREN

ENV_VAR = RUN_CHILDREN.name  # the folder child processes write their records to (set by mend run)

_state: dict[str, Any] = {"folder": None, "recorder": None}


def _record_path(folder: str) -> Path:
    return Path(folder) / f"{os.getpid()}.json"


def _flush() -> None:
    """Write this child's record now (called after every event)."""
    recorder, folder = _state["recorder"], _state["folder"]
    if recorder is None or folder is None:
        return
    try:
        data = recorder.data()
        for run in data.runs:
            run.kind, run.status = "child", RUNNING
        save(data, _record_path(folder))
    except Exception:  # a record that cannot be written must never break the program
        pass


def _become_child(recorder: Any, folder: str) -> None:
    """This process is a child: keep ``recorder`` (emptied of what the parent saw) and write its record."""
    _state["recorder"], _state["folder"] = recorder, folder
    recorder.reset()
    recorder.sink = _flush
    _flush()


def _after_fork_in_child() -> None:
    recorder, folder = _state["recorder"], _state["folder"]
    if recorder is not None and folder is not None and RUN_CHILDREN.raw() == folder:
        _become_child(recorder, folder)


_fork_hook_installed = False


def _install_fork_hook() -> None:
    global _fork_hook_installed
    if not _fork_hook_installed and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _fork_hook_installed = True


class ChildRecording:
    """Child processes record while the block between :meth:`start` and :meth:`finish` runs."""

    def __init__(self, recorder: Any) -> None:
        self.recorder = recorder
        self.folder = tempfile.mkdtemp(prefix="mend-children-")
        self.started: list[int] = []  # pids of multiprocessing children
        self._saved_env: dict[str, str | None] = {}
        self._start = None

    def start(self) -> ChildRecording:
        from mend.imports.settings import STARTUP_DIR

        for name in (ENV_VAR, "PYTHONPATH"):
            self._saved_env[name] = os.environ.get(name)
        os.environ[ENV_VAR] = self.folder
        parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != STARTUP_DIR]
        os.environ["PYTHONPATH"] = os.pathsep.join([STARTUP_DIR, *parts])
        _state["recorder"], _state["folder"] = self.recorder, self.folder
        _install_fork_hook()
        self._count_processes()
        return self

    def _count_processes(self) -> None:
        import multiprocessing.process as mp

        original = mp.BaseProcess.start
        started = self.started

        def start(process: Any) -> None:
            original(process)
            if process.pid is not None:
                started.append(process.pid)

        self._start = original
        mp.BaseProcess.start = start

    def finish(self, data: RunData) -> RunData:
        """``data`` with the children's sites merged and the counts in its run record; undoes :meth:`start`."""
        import multiprocessing.process as mp

        if self._start is not None:
            mp.BaseProcess.start = self._start
        _state["recorder"] = _state["folder"] = None
        for name, value in self._saved_env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        seen: set[int] = set()
        for record in sorted(Path(self.folder).glob("*.json")):
            with contextlib.suppress(DataFileError, ValueError):
                child = load(record)
                child.runs = []
                data = data.merge(child)
                seen.add(int(record.stem))
        shutil.rmtree(self.folder, ignore_errors=True)
        for run in data.runs:
            run.children = len(seen)
            run.unobserved_children = len(set(self.started) - seen)
        return data


class _AfterImport(importlib.abc.MetaPathFinder):
    """Runs ``callback`` once, right after the module ``name`` has been imported."""

    def __init__(self, name: str, callback: Any) -> None:
        self.name, self.callback, self.busy = name, callback, False

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname != self.name or self.busy:
            return None
        self.busy = True
        try:
            spec = next((s for f in sys.meta_path if f is not self and hasattr(f, "find_spec")
                         for s in [f.find_spec(fullname, path, target)] if s is not None), None)
        finally:
            self.busy = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        exec_module = spec.loader.exec_module

        def run_then_call(module: Any) -> None:
            exec_module(module)
            with contextlib.suppress(ValueError):
                sys.meta_path.remove(self)
            self.callback()

        spec.loader.exec_module = run_then_call
        return spec


def install_from_env() -> None:
    """In a spawned child of a recorded program: write an empty record (the child is observed), then record
    from the moment torch is imported (at once if it already is). Never raises."""
    folder = RUN_CHILDREN.raw()
    if not folder or _state["folder"] == folder:
        return

    def begin() -> None:
        try:
            from mend.analyzers.runtime.recorder import Recorder

            recorder = Recorder(kind="child")
            recorder.info = RunInfo(kind="child", status=RUNNING)
            recorder.start()
            _install_fork_hook()
            _become_child(recorder, folder)
        except Exception as exc:  # never break the child: its sites are then not observed
            print(f"mend: cannot record in child process {os.getpid()}: {exc}", file=sys.stderr)
            with contextlib.suppress(OSError):
                _record_path(folder).unlink()  # counted as not observed

    _state["folder"] = folder
    # observed from here: a child that never imports torch has no graph to break, and says so now
    with contextlib.suppress(Exception):
        save(RunData(runs=[RunInfo(kind="child", status=RUNNING)]), _record_path(folder))
    if "torch" in sys.modules:
        begin()
    else:
        sys.meta_path.insert(0, _AfterImport("torch", begin))


__all__ = ["ENV_VAR", "ChildRecording", "install_from_env"]
