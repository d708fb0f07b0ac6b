"""A gate never passes a run it did not see end well (issue 36): run.json is written as ``running`` before
the program starts and as ``finished`` with the exit status the process really ended with; breaks in
multiprocessing children are recorded; concurrent ``--append`` lose nothing."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="mend run supervises the program by fork")

HEAD = """
import atexit, os, signal, sys
import torch

def f(x):
    y = x.sin()
    print("debug", y.shape)
    return y.cos()

torch.compile(f, backend="eager")(torch.ones(3))
"""


def mend(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return subprocess.run([sys.executable, "-m", "mend.cli", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=300)


def run_and_gate(tmp_path: Path, tail: str) -> tuple[subprocess.CompletedProcess, dict, subprocess.CompletedProcess]:
    (tmp_path / "prog.py").write_text(HEAD + textwrap.dedent(tail))
    ran = mend("run", "prog.py", cwd=tmp_path)
    data = json.loads((tmp_path / ".mend" / "run.json").read_text())
    gate = mend("gate", "--max-graph-breaks", "5", cwd=tmp_path)
    return ran, data, gate


def test_a_clean_run_passes_and_is_finished(tmp_path: Path) -> None:
    ran, data, gate = run_and_gate(tmp_path, "")
    assert ran.returncode == 0, ran.stderr
    assert [(r["status"], r["exit_code"], r["recorded"]) for r in data["runs"]] == [("finished", 0, True)]
    assert gate.returncode == 0, gate.stdout


@pytest.mark.slow
@pytest.mark.parametrize("tail, code", [
    ("os._exit(0)", 0),
    ("os.kill(os.getpid(), signal.SIGKILL)", 128 + 9),
    ("os.kill(os.getpid(), signal.SIGTERM)", 128 + 15),
])
def test_a_program_that_never_returns_to_mend_fails_the_gate_even_over_a_passing_file(tmp_path, tail, code):
    run_and_gate(tmp_path, "")  # an earlier passing run.json is there
    ran, data, gate = run_and_gate(tmp_path, tail)
    assert ran.returncode == code, ran.stderr
    [run] = data["runs"]
    assert run["status"] == "finished" and run["recorded"] is False and run["exit_code"] == code
    assert gate.returncode == 1 and "not recorded" in gate.stdout, gate.stdout


def test_an_exit_code_set_at_exit_is_recorded(tmp_path: Path) -> None:
    ran, data, gate = run_and_gate(tmp_path, "atexit.register(lambda: os._exit(3))\n")
    assert ran.returncode == 3
    assert data["runs"][0]["exit_code"] == 3 and data["runs"][0]["recorded"] is True
    assert gate.returncode == 1 and "exited with code 3" in gate.stdout


def test_a_program_that_changes_folder_writes_the_data_file_where_mend_was_started(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    ran, data, gate = run_and_gate(tmp_path, "os.chdir('elsewhere')\n")
    assert ran.returncode == 0, ran.stderr
    assert not (tmp_path / "elsewhere" / ".mend").exists()
    assert data["runs"][0]["status"] == "finished" and data["breaks"]
    assert gate.returncode == 0, gate.stdout


def test_a_run_still_running_fails_the_gate(tmp_path: Path) -> None:
    from mend.analyzers.runtime import data as rd
    from mend.analyzers.runtime.gate import run_problems
    from mend.analyzers.runtime.runner import begin

    path = tmp_path / "run.json"
    begin(path, ["prog.py"], False, str(tmp_path))
    problems = run_problems(rd.load(path))
    assert any("never finished" in p for p in problems), problems


CHILDREN = """
import multiprocessing as mp
import torch

def g(x):
    y = x.cos()
    print("in the worker", y.shape)
    return y.sin()

def work(_):
    return float(torch.compile(g, backend="eager")(torch.ones(2)).sum())

if __name__ == "__main__":
    torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
    with mp.get_context("{method}").Pool(1) as pool:
        print(pool.map(work, [0]))
"""


@pytest.mark.slow
@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_breaks_in_multiprocessing_workers_are_recorded(tmp_path: Path, method: str) -> None:
    (tmp_path / "prog.py").write_text(CHILDREN.replace("{method}", method))
    ran = mend("run", "prog.py", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    data = json.loads((tmp_path / ".mend" / "run.json").read_text())
    assert [(b["path"], b["line"]) for b in data["breaks"]] == [("prog.py", 7)], data["breaks"]
    assert data["runs"][0]["children"] >= 1 and data["runs"][0]["unobserved_children"] == 0
    gate = mend("gate", "--max-graph-breaks", "0", cwd=tmp_path)
    assert gate.returncode == 1, gate.stdout


def _append(path: str, n: int, tag: int) -> None:
    from mend.analyzers.runtime import data as rd
    from mend.analyzers.runtime.runner import begin

    for i in range(n):
        info = begin(Path(path), [f"p{tag}-{i}"], True, "/")
        info.status = rd.FINISHED
        rd.save(rd.RunData(root="/", runs=[info]), path, append=True)


def test_concurrent_appends_lose_no_run(tmp_path: Path) -> None:
    path = tmp_path / "run.json"
    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append, args=(str(path), 10, t)) for t in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    from mend.analyzers.runtime import data as rd

    runs = rd.load(path).runs
    assert sorted(r.argv[0] for r in runs) == sorted(f"p{t}-{i}" for t in range(4) for i in range(10))
    assert all(r.status == rd.FINISHED for r in runs)


NO_TORCH_CHILD = """
import multiprocessing as mp

if __name__ == "__main__":
    import torch

    torch.compile(lambda x: x + 1, backend="eager")(torch.ones(2))
    with mp.get_context("spawn").Pool(1) as pool:
        print(pool.map(len, ["ab"]))
"""


@pytest.mark.slow
def test_a_spawned_worker_that_never_imports_torch_is_observed(tmp_path: Path) -> None:
    (tmp_path / "prog.py").write_text(NO_TORCH_CHILD)
    ran = mend("run", "prog.py", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    run = json.loads((tmp_path / ".mend" / "run.json").read_text())["runs"][0]
    assert run["children"] >= 1 and run["unobserved_children"] == 0  # the worker (and the resource tracker)
    assert mend("gate", cwd=tmp_path).returncode == 0
