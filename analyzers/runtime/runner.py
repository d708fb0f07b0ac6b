"""Run a user program with the recorder attached (``mend run``), like coverage.

The program's exit code, output and exceptions are its own: ``SystemExit`` codes pass through, an
uncaught exception prints its traceback (without mend's and runpy's frames) and exits 1, and the
data file is written in every case.

How a run ends is recorded, not assumed (``RunInfo.status``): :func:`begin` writes the run as ``running``
before the program starts; :func:`supervise` forks, the child runs the program in-process (as before) and
records its sites as ``returned``, and the parent waits for the child's real exit status (an ``atexit``
handler's exit code, ``os._exit``, a signal) and writes the run as ``finished`` with it. A run whose child
never returned to mend is ``finished`` but not ``recorded``; one whose parent was killed stays ``running``.
Where ``fork`` is missing the program runs in this process and is written ``finished`` when it returns.
"""

from __future__ import annotations

import os
import runpy
import signal
import sys
import time
import traceback
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from mend.analyzers.runtime.data import FINISHED, RUNNING, RunData, RunInfo, find_run, load, save, update_run


class RunError(Exception):
    """The program could not be started (missing file or module); nothing ran."""


@dataclass
class RunResult:
    exit_code: int
    data: RunData


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)  # what `sys.exit("message")` prints
    return 1


def _user_traceback(tb: TracebackType | None, skip_files: set[str]) -> TracebackType | None:
    """Drop the leading frames that belong to mend and runpy, like Python does for a script."""
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if not (filename.startswith("<frozen runpy") or os.path.realpath(filename) in skip_files):
            break
        tb = tb.tb_next
    return tb


def check_script(target: str) -> Path:
    """The script ``target`` names; :class:`RunError` when there is none to run."""
    script = Path(target)
    if not script.exists():
        raise RunError(f"no such file: {target}")
    if script.is_dir() and not (script / "__main__.py").exists():
        raise RunError(f"{target} is a folder without __main__.py")
    return script


def run_program(
    target: str,
    args: Sequence[str] = (),
    module: bool = False,
    source: Sequence[str] = (),
    fast: bool = False,
) -> RunResult:
    """Run ``target`` (a script path, or a module name with ``module=True``) under the recorder."""
    from mend.analyzers.runtime.recorder import Recorder

    if module:
        import importlib.util

        sys.path.insert(0, os.getcwd())
        try:
            spec = importlib.util.find_spec(target)
        except (ImportError, ValueError) as exc:
            raise RunError(f"cannot find module {target!r}: {exc}") from exc
        if spec is None:
            raise RunError(f"no module named {target!r}")
        argv0 = spec.origin or target
    else:
        script = check_script(target)
        sys.path.insert(0, str(script.resolve().parent if script.is_file() else script.resolve()))
        argv0 = target

    from mend.analyzers.runtime.children import ChildRecording

    recorder = Recorder(source=source, fast=fast, kind="run")
    recorder.info.argv = [("-m " + target) if module else target, *args]
    saved_argv = sys.argv
    sys.argv = [argv0, *args]
    skip = {os.path.realpath(__file__), os.path.realpath(runpy.__file__)}
    code = 0
    children = ChildRecording(recorder)
    recorder.start()
    children.start()
    try:
        if module:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(target, run_name="__main__")
    except SystemExit as exc:
        code = _exit_code(exc.code)
    except KeyboardInterrupt:
        code = 130
        traceback.print_exc()
    except BaseException as exc:  # the program's own error: show it as Python would
        code = 1
        traceback.print_exception(type(exc), exc, _user_traceback(exc.__traceback__, skip))
    finally:
        recorder.stop()
        sys.argv = saved_argv
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:
                pass
    recorder.info.exit_code = code
    return RunResult(code, children.finish(recorder.data()))


def begin(path: Path, argv: list[str], append: bool, root: str) -> RunInfo:
    """Write the run as ``running`` to the data file before the program starts (replacing the file, or
    added to it with ``append``), so that a run that never ends well cannot pass on an older file."""
    info = RunInfo(argv=argv, started=time.strftime("%Y-%m-%dT%H:%M:%S%z"), id=uuid.uuid4().hex,
                   status=RUNNING, python=sys.version.split()[0])
    if append and path.exists():
        update_run(path, info, root)
    else:
        save(RunData(root=root, runs=[info]), path)
    return info


def supervise(path: Path, info: RunInfo, root: str) -> int | None:
    """Fork. In the child (the one that runs the program) return None. In this process wait for the child,
    write how it ended to the data file, and return the exit code to exit with (the child's, 128 + N for
    signal N). Returns None at once, forking nothing, where ``fork`` is missing."""
    if not hasattr(os, "fork"):
        return None
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    pid = os.fork()
    if pid == 0:
        return None
    forward = {sig: signal.signal(sig, lambda signum, frame: os.kill(pid, signum))
               for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)}
    ignored = signal.signal(signal.SIGINT, signal.SIG_IGN)  # the terminal sends it to the child too
    try:
        while True:
            try:
                _, status = os.waitpid(pid, 0)
                break
            except ChildProcessError:
                status = 0
                break
    finally:
        for sig, handler in forward.items():
            signal.signal(sig, handler)
        signal.signal(signal.SIGINT, ignored)
    code, name = _ended(status)
    _finish(path, info, root, code, name)
    return code


def _ended(status: int) -> tuple[int, str]:
    """(exit code, signal name) of a wait status: a signal N is 128 + N, as a shell says."""
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        try:
            name = signal.Signals(sig).name
        except ValueError:
            name = f"signal {sig}"
        return 128 + sig, name
    return os.waitstatus_to_exitcode(status), ""


def _finish(path: Path, info: RunInfo, root: str, code: int, signal_name: str) -> None:
    """Write run ``info.id`` as ``finished`` with the exit code the process really ended with."""
    try:
        record = find_run(load(path), info.id)
    except Exception:  # the file is gone or damaged: the run record is written again
        record = None
    if record is None or record.status == RUNNING:  # the program never returned to mend
        record = info
        record.recorded = False
    record.status, record.exit_code, record.signal = FINISHED, code, signal_name
    try:
        update_run(path, record, root)
    except Exception as exc:
        print(f"mend: could not write how the run ended to {path}: {exc}", file=sys.stderr)
