"""``mend fix`` applies a finding only to the bytes it was found in, and never hangs on a FIFO.

* a file edited between the analysis and its turn to be written is analysed again (never patched at the
  old lines);
* concurrent ``mend fix`` runs on one tree leave every file as one run would;
* a FIFO named ``*.py`` is skipped with a note (``check`` and ``fix`` would block reading it);
* a temporary file a killed writer left (``.NAME.*.mend-tmp``) is removed by the next write.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

MODEL = '''import logging

import torch
from torch import nn

logger = logging.getLogger(__name__)


class M(nn.Module):
    def count_tokens(self, x):
        self.seen = getattr(self, "seen", 0) + x.numel()

    def forward(self, x):
        logger.info("start %s", x.shape)
        self.count_tokens(x)
        y = x * 2
        print("mid", y.shape)
        self.count_tokens(y)
        return y + 1


m = torch.compile(M())
'''


# after one guard is added above it, the print's old line holds `self.count_tokens(y)`
SHIFTED = MODEL.replace("        self.count_tokens(x)\n        y = x * 2\n        print(\"mid\", y.shape)\n"
                        "        self.count_tokens(y)\n",
                        "        y = x * 2\n        self.count_tokens(y)\n        print(\"mid\", y.shape)\n")


def _mend(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mend.cli", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)


def _fixed_alone(tmp_path: Path, text: str, *options: str) -> str:
    """What one ``mend fix`` run makes of ``text``."""
    solo = tmp_path / "solo"
    solo.mkdir(exist_ok=True)
    (solo / "m.py").write_text(text)
    r = _mend("fix", "--isolated", *options, "m.py", cwd=solo)
    assert r.returncode == 0, r.stdout + r.stderr
    return (solo / "m.py").read_text()


def test_a_file_edited_after_the_analysis_is_analysed_again(tmp_path: Path, monkeypatch):
    from mend.analyzers import static
    from mend.rewriter.api import fix_paths
    from mend.rewriter.engine import FixOptions

    tree = tmp_path / "tree"
    tree.mkdir()
    target = tree / "m.py"
    target.write_text(MODEL)
    edited = MODEL.replace("    def forward(self, x):\n",
                           "    def forward(self, x):\n        x = x.float()\n        x = x.contiguous()\n")
    real_check = static.check_paths

    def check_then_edit(*args, **kwargs):  # the user saves the file right after mend read it
        result = real_check(*args, **kwargs)
        target.write_text(edited)
        return result

    monkeypatch.setattr(static, "check_paths", check_then_edit)
    run = fix_paths([tree], FixOptions(), isolated=True)
    assert not run.errors, run.errors
    monkeypatch.undo()
    assert target.read_text() == _fixed_alone(tmp_path, edited)
    assert "self.count_tokens(x)\n" in target.read_text().split("def forward")[1].split("y = x * 2")[0]


def test_concurrent_fix_runs_leave_every_file_as_one_run_would(tmp_path: Path):
    assert SHIFTED != MODEL
    expected = _fixed_alone(tmp_path, SHIFTED, "--side-effects", "guard")
    assert expected.count("is_compiling") == 2
    tree = tmp_path / "tree"
    for i in range(3):
        sub = tree / f"pkg{i}"
        sub.mkdir(parents=True)
        for j in range(20):
            (sub / f"m{j}.py").write_text(SHIFTED)
    command = [sys.executable, "-m", "mend.cli", "fix", "--isolated", "--side-effects", "guard", "."]
    procs = [subprocess.Popen(command, cwd=tree,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [p.communicate(timeout=600) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode in (0, 2), out + err
        assert "Traceback" not in err
    wrong = [str(f.relative_to(tree)) for f in sorted(tree.rglob("*.py")) if f.read_text() != expected]
    assert wrong == []
    again = _mend("fix", "--isolated", "--side-effects", "guard", "--diff", ".", cwd=tree)
    assert again.returncode == 0 and again.stdout.startswith("Would fix 0 finding(s)"), again.stdout + again.stderr


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_named_py_is_skipped_with_a_note(tmp_path: Path):
    (tmp_path / "m.py").write_text(MODEL)
    os.mkfifo(tmp_path / "pipe.py")
    r = _mend("check", "--isolated", ".", cwd=tmp_path, timeout=120)
    assert r.returncode == 1, r.stdout + r.stderr
    assert "m.py:14:9: MND102" in r.stdout
    assert "skipped pipe.py: not a regular file (a FIFO" in r.stderr
    r = _mend("check", "--isolated", "pipe.py", cwd=tmp_path, timeout=120)
    assert r.returncode == 0 and "skipped pipe.py" in r.stderr
    r = _mend("fix", "--isolated", ".", cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "note: pipe.py: skipped: not a regular file (a FIFO" in r.stdout
    assert "Fixed 2 finding(s) in 1 file(s)" in r.stdout


# what a fix run makes beside the files it repairs: the tree's helper module, the cache folder (its decisions)
MADE = {"_mend.py", ".mend_cache"}


def test_a_temporary_file_left_by_a_killed_write_is_removed_by_the_next(tmp_path: Path):
    (tmp_path / "m.py").write_text(MODEL)
    litter = tmp_path / ".m.py.abc123xy.mend-tmp"
    litter.write_text(MODEL[:40])  # what a SIGKILL between the write and the rename leaves
    other = tmp_path / ".notes.txt.mend-tmp"  # not ours to remove: another file's name
    other.write_text("x")
    r = _mend("fix", "--isolated", ".", cwd=tmp_path)
    assert r.returncode == 0, r.stdout + r.stderr
    assert not litter.exists() and other.exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name not in MADE) == [".notes.txt.mend-tmp", "m.py"]


def test_a_killed_fix_run_leaves_every_file_whole(tmp_path: Path):
    """SIGKILL at a random moment of a run over many files: each file is the original or the repair."""
    import signal
    import time

    expected = _fixed_alone(tmp_path, MODEL)
    tree = tmp_path / "tree"
    tree.mkdir()
    for j in range(30):
        (tree / f"m{j}.py").write_text(MODEL)
    p = subprocess.Popen([sys.executable, "-m", "mend.cli", "fix", "--isolated", "."], cwd=tree,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline and all(f.read_text() == MODEL for f in tree.glob("*.py")):
        time.sleep(0.01)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert {f.read_text() for f in tree.glob("m*.py")} <= {MODEL, expected}
    r = _mend("fix", "--isolated", ".", cwd=tree)
    assert r.returncode == 0
    assert sorted(p.name for p in tree.iterdir() if p.name not in MADE) == sorted(f"m{j}.py" for j in range(30))
    shutil.rmtree(tree)
