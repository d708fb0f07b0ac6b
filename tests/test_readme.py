"""The README is a front door that tells the truth: at most 200 lines, and every `mend` command of its
console blocks prints what the block shows.

The commands run in order, as `make demo` runs them, in a copy of the repository's examples: ``examples/``
and the demo's ``.mend/demo/examples``. A block's output lines are compared with the command's output
(stdout and stderr, as a terminal shows them) line by line; ``…`` inside a line stands for any text
(timings), and a line that is only ``…`` for any number of lines. `mend check` runs without torch and is
checked in every test run; the commands that run the models are slow.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
README = REPO / "README.md"
MEND = Path(sys.executable).with_name("mend")
ANSI = re.compile(r"\x1b\[[0-9;]*m")
SKIP = "…"


def console_commands() -> list[tuple[str, list[str]]]:
    """(command, expected output lines) of every `$ mend ...` line of the README's console blocks."""
    out: list[tuple[str, list[str]]] = []
    for block in re.findall(r"^```console\n(.*?)^```", README.read_text(encoding="utf-8"), re.M | re.S):
        current: list[str] | None = None  # the output lines of the block's last command
        for line in block.splitlines():
            if line.startswith("$ "):
                out.append((line[2:], []))
                current = out[-1][1]
            elif current is not None:
                current.append(line)
    return [(cmd, lines) for cmd, lines in out if cmd.startswith("mend ")]


def matches(expected: list[str], actual: list[str]) -> bool:
    """``actual`` is ``expected``, where ``…`` in a line is any text and a ``…`` line any lines."""
    if not expected:
        return not actual
    head, rest = expected[0], expected[1:]
    if head == SKIP:
        return any(matches(rest, actual[i:]) for i in range(len(actual) + 1))
    pattern = ".*".join(re.escape(part) for part in head.split(SKIP))
    return bool(actual) and re.fullmatch(pattern, actual[0]) is not None and matches(rest, actual[1:])


def run(command: str, cwd: Path) -> tuple[int, list[str]]:
    argv = shlex.split(command)
    env = dict(os.environ, PYTHONUNBUFFERED="1", COLUMNS="200", NO_COLOR="1", TORCHINDUCTOR_COMPILE_THREADS="1")
    proc = subprocess.run([str(MEND), *argv[1:]], cwd=cwd, env=env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=900)
    lines = [ANSI.sub("", line).rstrip() for line in proc.stdout.splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    return proc.returncode, lines


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """The demo's layout: ``examples/`` and the copy it repairs, ``.mend/demo/examples``."""
    shutil.copytree(REPO / "examples", tmp_path / "examples", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(tmp_path / "examples", tmp_path / ".mend" / "demo" / "examples")
    return tmp_path


def check_outputs(commands: list[tuple[str, list[str]]], cwd: Path) -> None:
    for command, expected in commands:
        _, actual = run(command, cwd)
        assert matches(expected, actual), (f"README: `{command}` no longer prints what the README shows.\n"
                                           "README:\n" + "\n".join(expected) + "\n\nprinted:\n" + "\n".join(actual))


def test_the_readme_is_a_front_door():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 200
    assert text.startswith("# mend\n\n```bash\nmake demo") and "make test" in text.split("\n## ")[0]
    assert "docs/results.md" in text and "docs/settings.md" in text
    linked = re.findall(r"\]\(((?:docs|benchmarks)/[^)#]*)", text)
    assert linked and all((REPO / path).exists() for path in linked), [p for p in linked if not (REPO / p).exists()]


def test_the_commands_are_all_checked():
    commands = [cmd.split()[1] for cmd, _ in console_commands()]
    assert {"check", "run", "report", "gate", "fix", "bench"} <= set(commands), commands
    assert all(lines for _, lines in console_commands()), "a command without its output"


def test_matching_understands_elisions():
    assert matches(["a", SKIP, "d …s"], ["a", "b", "c", "d 1.5 s"])
    assert matches([SKIP, "x"], ["x"]) and not matches(["a"], ["a", "b"]) and not matches(["a …"], ["b 1"])


def test_mend_check_prints_what_the_readme_shows(workspace):
    check_outputs([c for c in console_commands() if c[0].startswith("mend check")], workspace)


@pytest.mark.slow
def test_the_demo_commands_print_what_the_readme_shows(workspace):
    """run, report, gate, fix --verify, fix, run and gate again, bench: in order, as the demo runs them."""
    check_outputs([c for c in console_commands() if not c[0].startswith("mend check")], workspace)
