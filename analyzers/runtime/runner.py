"""Run a user program in this interpreter with the recorder attached (``mend run``), like coverage.

The program's exit code, output and exceptions are its own: ``SystemExit`` codes pass through, an
uncaught exception prints its traceback (without mend's and runpy's frames) and exits 1, and the
data file is written in every case.
"""

from __future__ import annotations

import os
import runpy
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

from mend.analyzers.runtime.data import RunData


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
        script = Path(target)
        if not script.exists():
            raise RunError(f"no such file: {target}")
        if script.is_dir() and not (script / "__main__.py").exists():
            raise RunError(f"{target} is a folder without __main__.py")
        sys.path.insert(0, str(script.resolve().parent if script.is_file() else script.resolve()))
        argv0 = target

    recorder = Recorder(source=source, fast=fast, kind="run")
    recorder.info.argv = [("-m " + target) if module else target, *args]
    saved_argv = sys.argv
    sys.argv = [argv0, *args]
    skip = {os.path.realpath(__file__), os.path.realpath(runpy.__file__)}
    code = 0
    recorder.start()
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
    return RunResult(code, recorder.data())
