"""The time bound per file (``MEND_FILE_TIME_LIMIT``, :mod:`mend.deadline`): a file whose analysis or repair
runs past it is reported with the limit and left byte for byte as it was; the run goes on with the other files.

* ``mend check -j 2``: the file is skipped with a message and one MND902 finding (exit 1, as an unreadable
  file), in a worker process; nothing of it is cached, so a run without the limit analyses it in full;
* ``mend fix``: past the limit in the analysis or in the repair, the file is an error (exit 2, as a file that
  cannot be read or written), its bytes unchanged, and the other file of the run is repaired.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mend import deadline
from mend.cli.app import app

SMALL = "import torch\n\n\n@torch.compile\ndef f(x):\n    print(x)\n    return x + 1\n"
DENSE = '''

@torch.compile
def f_{i}(x):
    print("a", x)
    if x.sum() > 0:
        x = x + {i}
    return x
'''


def dense(path: Path, functions: int) -> bytes:
    """A file of ``functions`` compiled functions, one finding each; its bytes."""
    path.write_text("import torch\n" + "".join(DENSE.format(i=i) for i in range(functions)))
    return path.read_bytes()


def test_a_bound_ends_its_block_and_an_inner_one_never_extends_it() -> None:
    deadline.check()  # no bound: never raises
    with deadline.bounded(0.05):
        with deadline.bounded(60.0):  # the outer bound ends sooner: it stays in force
            time.sleep(0.1)
            with pytest.raises(deadline.TimeLimit, match=r"took longer than the 0.05 s limit \(MEND_FILE_TIME_LIMIT\)"):
                deadline.check()
    deadline.check()
    with deadline.bounded(None):
        time.sleep(0.01)
        deadline.check()


def test_the_limit_comes_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEND_FILE_TIME_LIMIT", raising=False)
    assert deadline.limit() == 120.0
    monkeypatch.setenv("MEND_FILE_TIME_LIMIT", "0")
    assert deadline.limit() is None
    monkeypatch.setenv("MEND_FILE_TIME_LIMIT", "2.5")
    assert deadline.limit() == 2.5


def _check(root: Path, limit: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "MEND_FILE_TIME_LIMIT": limit}
    return subprocess.run([sys.executable, "-m", "mend.cli", "check", "--isolated", "-j", "2", "."], cwd=root,
                          env=env, capture_output=True, text=True, timeout=300)


def test_check_skips_a_file_past_the_limit_in_a_worker_and_caches_nothing_of_it(tmp_path: Path) -> None:
    for i in range(32):  # 32 files or more: the per-file pass runs in worker processes
        (tmp_path / f"small_{i}.py").write_text(SMALL)
    before = dense(tmp_path / "dense.py", 3000)  # about 2 s of analysis
    proc = _check(tmp_path, "0.3")
    assert proc.returncode == 1, proc.stderr
    assert "mend: skipped dense.py: analysis took longer than the 0.3 s limit (MEND_FILE_TIME_LIMIT)" in proc.stderr
    lines = proc.stdout.splitlines()
    assert "dense.py:1:1: MND902 cannot analyse file: took longer than the 0.3 s limit (MEND_FILE_TIME_LIMIT)" in lines
    assert sum(line.startswith("small_") and " MND101 " in line for line in lines) == 32
    assert not any(line.startswith("dense.py") and " MND101 " in line for line in lines)
    assert (tmp_path / "dense.py").read_bytes() == before
    again = _check(tmp_path, "0")  # no limit, the same cache: the file is analysed, not replayed
    assert again.returncode == 1 and "skipped" not in again.stderr
    assert sum(line.startswith("dense.py") and " MND101 " in line for line in again.stdout.splitlines()) == 3000
    assert "MND902" not in again.stdout


@pytest.mark.parametrize(("functions", "limit", "phase"), [(1000, "1", "repair"), (6000, "0.5", "analysis")])
def test_fix_leaves_a_file_past_the_limit_unchanged_and_repairs_the_others(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, functions: int, limit: str, phase: str) -> None:
    """1000 findings take about 3 s to repair and 0.3 s to analyse; 6000 take 4 s to analyse."""
    before = dense(tmp_path / "dense.py", functions)
    (tmp_path / "small.py").write_text(SMALL)
    monkeypatch.setenv("MEND_FILE_TIME_LIMIT", limit)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["fix", "--isolated", "."])
    assert result.exit_code == 2, result.output
    assert (f"error: dense.py: skipped: {phase} took longer than the {limit} s limit (MEND_FILE_TIME_LIMIT); "
            "left unchanged") in result.output
    assert (tmp_path / "dense.py").read_bytes() == before
    assert "_mend_emit(__name__, \"print\", x)" in (tmp_path / "small.py").read_text()
    assert "Fixed 1 finding(s) in 1 file(s)" in result.output


def test_fix_leaves_a_file_whose_repairs_involve_too_much_code_and_repairs_the_others(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``MEND_FIX_MAX_BYTES`` bounds the code LibCST takes from one file (the statements the repairs involve,
    not the whole file): a file of many findings past it is reported at once and left as it was; a large file
    whose few findings involve little code is repaired."""
    before = dense(tmp_path / "dense.py", 100)  # every function has findings: about 10,000 characters
    sparse = "import torch\n" + "".join(f"\n\ndef table_{i}(key):\n    return {{'a': {i}}}.get(key)\n"
                                         for i in range(400)) + SMALL[len("import torch\n"):]
    (tmp_path / "sparse.py").write_text(sparse)  # 20,000 characters, one finding
    monkeypatch.setenv("MEND_FIX_MAX_BYTES", "5000")
    monkeypatch.chdir(tmp_path)
    start = time.perf_counter()
    result = CliRunner().invoke(app, ["fix", "--isolated", "--no-cache", "-j", "1", "."])
    assert result.exit_code == 2, result.output
    assert re.search(r"error: dense\.py: skipped: its repairs involve \d,\d\d\d characters of code, more than the "
                     r"5,000 mend fix parses in one file \(MEND_FIX_MAX_BYTES; .*\); left unchanged", result.output)
    assert (tmp_path / "dense.py").read_bytes() == before
    assert "_mend_emit(__name__, \"print\", x)" in (tmp_path / "sparse.py").read_text()
    assert time.perf_counter() - start < 60  # not repaired first: 100 findings take seconds to repair
