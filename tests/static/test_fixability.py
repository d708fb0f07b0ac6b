"""Fixability is one decision (``analyzers/static/fixability.py``): ``mend check`` marks a finding ``[*]``
only where ``mend fix`` decided to fix it for the same bytes, ``[?]`` before ``mend fix`` looked, and not at
all where ``mend fix`` declines; after ``mend fix`` nothing is promised that ``mend fix`` would not do."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MEND = [sys.executable, "-m", "mend.cli"]
SITE = re.compile(r"^(\S+?):(\d+):(\d+): (MND\d+) (\[[*?]\] )?")

DECLINED = '''\
import torch
from torch import nn


class M(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(2)])
        self.layerdrop = 0.1

    def forward(self, x):
        for layer in self.layers:
            p = torch.randn([])  # not a uniform draw: no LayerDrop guard holds
            if p < self.layerdrop:
                continue
            x = layer(x)
        return x


m = torch.compile(M())
'''


def mend(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*MEND, *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def findings(cwd: Path, *args: str) -> tuple[dict[tuple[str, str, str], str], str]:
    """{(file, line, code): mark} of ``mend check``, and its last line."""
    done = mend("check", *args, ".", cwd=cwd)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    out = {}
    for line in done.stdout.splitlines():
        m = SITE.match(line)
        if m:
            out[(m[1], m[2], m[4])] = (m[5] or "").strip()
    return out, done.stdout.strip().splitlines()[-1]


@pytest.fixture()
def tree(tmp_path: Path) -> Path:
    for f in EXAMPLES.glob("*.py"):
        shutil.copy(f, tmp_path)
    return tmp_path


def test_check_promises_exactly_what_fix_removes(tree: Path) -> None:
    before, _ = findings(tree)
    assert before and set(before.values()) <= {"[?]", ""}  # nothing decided yet: nothing promised as fixed
    assert "[?]" in before.values()
    assert mend("fix", "--diff", ".", cwd=tree).returncode in (0, 1)
    decided, _ = findings(tree)
    assert "[?]" not in decided.values()
    promised = {site for site, mark in decided.items() if mark == "[*]"}
    assert promised
    done = mend("fix", ".", cwd=tree)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    after, last = findings(tree)
    # each [*] finding is gone (positions move after a repair: compare by rule and file), nothing else went
    assert _minus(_count(before), _count(after)) == _count(promised)
    assert not [m for m in after.values() if m], after  # after the fix: nothing fixable, nothing undecided
    assert "fixable with `mend fix`" not in last
    assert "Would fix 0 finding" in mend("fix", "--diff", ".", cwd=tree).stdout


def test_hidden_fixes_are_the_ones_unsafe_fixes_apply(tree: Path) -> None:
    mend("fix", "--diff", ".", cwd=tree)
    mend("fix", "--diff", "--unsafe-fixes", ".", cwd=tree)
    _, last = findings(tree)
    hidden = int(re.search(r"(\d+) hidden fix", last)[1])
    before, _ = findings(tree)
    mend("fix", "--unsafe-fixes", ".", cwd=tree)
    after, last = findings(tree)
    assert sum(_count(before).values()) - sum(_count(after).values()) == hidden + sum(
        1 for m in before.values() if m == "[*]")
    assert "hidden" not in last and "fixable" not in last


def test_a_declined_fix_is_not_promised_and_says_why(tmp_path: Path) -> None:
    (tmp_path / "loop.py").write_text(DECLINED)
    (marks, _) = findings(tmp_path)
    assert sorted(marks.values()) == ["", "[?]"]  # MND506 has no fix; MND201 has one
    assert "MND201 not fixed" in mend("fix", "--diff", "--unsafe-fixes", ".", cwd=tmp_path).stdout
    mend("fix", "--diff", ".", cwd=tmp_path)
    (marks, last) = findings(tmp_path)
    assert list(marks.values()) == ["", ""]
    assert "fixable" not in last and "hidden" not in last
    full = mend("check", "--output-format", "full", ".", cwd=tmp_path).stdout
    assert "mend fix does not fix this:" in full


def test_decisions_hold_for_the_bytes_they_were_made_on(tree: Path) -> None:
    mend("fix", "--diff", ".", cwd=tree)
    decided, _ = findings(tree)
    assert "[*]" in decided.values()
    block = tree / "transformer_block.py"
    block.write_text(block.read_text() + "\n# edited\n")
    marks, _ = findings(tree)
    assert {m for (f, _, _), m in marks.items() if f == "transformer_block.py"} <= {"[?]", ""}
    assert {m for (f, _, _), m in marks.items() if f == "transformer_block.py"} != {""}


def _count(sites) -> dict[tuple[str, str], int]:
    out: dict[tuple[str, str], int] = {}
    for f, _, code in sites:
        out[(f, code)] = out.get((f, code), 0) + 1
    return out


def _minus(a: dict, b: dict) -> dict:
    return {k: v - b.get(k, 0) for k, v in a.items() if v - b.get(k, 0)}


def test_after_a_safe_fix_unsafe_fixes_are_promised_only_once_decided(tree: Path) -> None:
    """A safe `mend fix` writes bytes whose unsafe fixes nobody decided: check says they may apply ([?]), not
    that they are hidden fixes, until `mend fix --unsafe-fixes --diff` decides; then the hidden count is what
    `--unsafe-fixes` applies (x-transformers: "9 hidden fixes" after a safe fix, then 4 applied)."""
    assert mend("fix", ".", cwd=tree).returncode in (0, 1)
    out = mend("check", ".", cwd=tree).stdout
    assert "hidden fix" not in out, out
    assert re.search(r"\[\?\] \d+ with a fix that `mend fix --unsafe-fixes` may apply", out), out
    assert mend("fix", "--diff", "--unsafe-fixes", ".", cwd=tree).returncode in (0, 1)
    before, _ = findings(tree)
    out = mend("check", ".", cwd=tree).stdout
    assert "may apply" not in out, out
    found = re.search(r"(\d+) hidden fix", out)
    hidden = int(found[1]) if found else 0
    assert mend("fix", "--unsafe-fixes", ".", cwd=tree).returncode in (0, 1)
    after, _ = findings(tree)
    assert sum(_count(before).values()) - sum(_count(after).values()) == hidden
    assert hidden > 0
