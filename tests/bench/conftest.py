"""Fixtures for the mend bench tests: a hand-repaired copy of examples/transformer_block.py."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


@pytest.fixture
def fixed_dir(tmp_path: Path) -> Path:
    """A --fixed folder (copied to tmp_path so that no test writes into the repository)."""
    dest = tmp_path / "fixed"
    shutil.copytree(HERE / "fixtures" / "fixed", dest)
    return dest


@pytest.fixture
def in_repo(monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(REPO)
    return REPO


@pytest.fixture
def wrong_dir(tmp_path: Path) -> Path:
    """A --fixed folder whose 'repair' doubles the model's output."""
    dest = tmp_path / "wrong"
    shutil.copytree(HERE / "fixtures" / "wrong", dest)
    return dest
