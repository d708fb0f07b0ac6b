"""Shared fixtures. Area-specific fixtures live in tests/<area>/conftest.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"

# Keep compiled-kernel caches of the test run away from the user's home directory.
os.environ.setdefault("MEND_CACHE_DIR", str(REPO / ".mend_cache" / "test"))


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture
def examples_dir() -> Path:
    return EXAMPLES
