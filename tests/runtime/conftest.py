"""Fixtures for the runtime recorder tests: write a program to tmp_path and import it fresh."""

from __future__ import annotations

import importlib.util
import sys
import textwrap
import uuid
from pathlib import Path

import pytest


@pytest.fixture
def load_module(tmp_path):
    """``load_module(source, name=None) -> module``: a fresh module from dedented ``source``."""

    def load(source: str, name: str | None = None, folder: Path | None = None):
        name = name or f"mend_rt_{uuid.uuid4().hex[:10]}"
        where = folder or tmp_path
        where.mkdir(parents=True, exist_ok=True)
        path = where / f"{name}.py"
        path.write_text(textwrap.dedent(source))
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    return load


def line_of(module, marker: str) -> int:
    """1-based line of the first line of ``module``'s file containing ``marker``."""
    for i, line in enumerate(Path(module.__file__).read_text().splitlines(), start=1):
        if marker in line:
            return i
    raise AssertionError(f"{marker!r} not in {module.__file__}")
