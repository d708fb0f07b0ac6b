"""Fixtures for the import hook: a small package with known breaks, written into a temporary folder."""

from __future__ import annotations

import itertools
import sys
import textwrap
from pathlib import Path

import pytest

MODEL = '''\
import logging

import torch
from torch import nn

from {pkg}.helpers import scale

logger = logging.getLogger(__name__)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        logger.debug("block output %s", h.shape)  # a logger call breaks the graph
        if h.shape[0] > 100:
            raise ValueError("too many rows")  # the line after the repaired call
        return scale(h)
'''

HELPERS = '''\
import logging

logger = logging.getLogger(__name__)


def scale(h):
    logger.info("scaling")
    return h * 2


def fail():
    raise RuntimeError("from helpers")
'''

_names = itertools.count()


def write_package(root: Path, pkg: str, **extra: str) -> Path:
    """``root/pkg``: ``model.py`` (a module whose ``forward`` logs), ``helpers.py`` (called from it) and
    any ``extra`` modules (name -> source)."""
    folder = root / pkg
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "model.py").write_text(MODEL.format(pkg=pkg))
    (folder / "helpers.py").write_text(HELPERS)
    for name, text in extra.items():
        (folder / f"{name}.py").write_text(textwrap.dedent(text))
    return folder


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """(package name, its folder, the cache folder); the package is importable, and the hook, the package's
    modules and MEND_REPAIR are gone after the test."""
    import mend.imports as mi

    pkg = f"mend_toy_{next(_names)}_{abs(hash(str(tmp_path))) % 10**6}"
    folder = write_package(tmp_path / "pkgs", pkg)
    monkeypatch.syspath_prepend(str(tmp_path / "pkgs"))
    monkeypatch.delenv("MEND_REPAIR", raising=False)
    monkeypatch.setenv("PYTHONPATH", "")
    monkeypatch.chdir(tmp_path)
    yield pkg, folder, tmp_path / "cache"
    mi.uninstall()
    for name in [m for m in sys.modules if m == pkg or m.startswith(pkg + ".")]:
        del sys.modules[name]


@pytest.fixture(autouse=True)
def _own_repair_key(tmp_path_factory, monkeypatch):
    """The repair cache's signing key in a folder of the test run, never the user's."""
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path_factory.getbasetemp() / "mend-config"))
    monkeypatch.delenv("MEND_REPAIR_CACHE_KEY", raising=False)
