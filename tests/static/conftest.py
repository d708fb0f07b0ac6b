"""Shared helpers for the static analyzer tests."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
EXPECT_RE = re.compile(r"#\s*expect:\s*(?P<codes>MND\d+(?:\s*,\s*MND\d+)*)")


def expected(path: Path) -> set[tuple[int, str]]:
    """``(line, code)`` pairs from ``# expect: MND101`` comments of a fixture."""
    out = set()
    for i, line in enumerate(path.read_text().splitlines(), 1):
        m = EXPECT_RE.search(line)
        if m:
            out |= {(i, c.strip()) for c in m.group("codes").split(",")}
    return out


def fixture_files() -> list[Path]:
    return sorted(FIXTURES.glob("*.py"))


@pytest.fixture
def mend_cli():
    """Run the ``mend`` CLI in a subprocess: (args, cwd=None, stdin=None) -> CompletedProcess."""
    import subprocess

    def run(args, cwd=None, stdin=None, env=None):
        return subprocess.run([sys.executable, "-m", "mend.cli", *args], cwd=cwd, input=stdin,
                              capture_output=True, text=True, timeout=300, env=env)

    return run
