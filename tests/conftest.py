"""Shared fixtures. Area-specific fixtures live in tests/<area>/conftest.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
EXAMPLES = REPO / "examples"

# Keep compiled-kernel caches of the test run away from the user's home directory.
os.environ.setdefault("MEND_CACHE_DIR", str(REPO / ".mend_cache" / "test"))
# ... and the key that signs the graph and repair caches (mend.imports.trust), created on first use.
os.environ.setdefault("XDG_CONFIG_HOME", str(REPO / ".mend_cache" / "test-config"))


@pytest.fixture
def repo_root() -> Path:
    return REPO


@pytest.fixture
def examples_dir() -> Path:
    return EXAMPLES
