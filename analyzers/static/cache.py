"""The per-file result cache of ``mend check``.

One pickle per mend version under ``<cache dir>/check/``, mapping each file path to the key of its
last analysis and the resulting :class:`FileSummary`. The key is a hash of the file's bytes, its
module name, the analysis-relevant configuration and a fingerprint of mend's analyzer sources (so
editing a rule invalidates the cache even without a version bump). Rule selection, ``noqa`` and
``per-file-ignores`` are applied after the cache, so changing them never needs a re-analysis.

The cache directory defaults to ``.mend_cache/`` beside the configuration root (the folder holding
the ``pyproject.toml`` with ``[tool.mend]``), else the current directory; it gets its own
``.gitignore``. Writes are atomic (temporary file + rename); a corrupt or unreadable cache is
treated as empty.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path

from mend import __version__
from mend.analyzers.static.summary import FileSummary

_FINGERPRINT: str | None = None


def analyzer_fingerprint() -> str:
    global _FINGERPRINT
    if _FINGERPRINT is None:
        h = hashlib.blake2b(__version__.encode(), digest_size=16)
        here = Path(__file__).resolve().parent
        for f in sorted(here.rglob("*.py")):
            try:
                h.update(f.read_bytes())
            except OSError:
                pass
        _FINGERPRINT = h.hexdigest()
    return _FINGERPRINT


def file_key(data: bytes, module: str, config_fingerprint: str) -> str:
    h = hashlib.blake2b(data, digest_size=20)
    h.update(b"\0" + module.encode() + b"\0" + config_fingerprint.encode() + b"\0" + analyzer_fingerprint().encode())
    return h.hexdigest()


class ResultCache:
    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.file = directory / "check" / f"v{__version__}.pickle"
        self.entries: dict[str, tuple[str, FileSummary]] = {}
        self.dirty = False
        self.hits = 0

    def load(self) -> None:
        try:
            with open(self.file, "rb") as fh:
                data = pickle.load(fh)
            if isinstance(data, dict):
                self.entries = data
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, ValueError, TypeError):
            self.entries = {}

    def get(self, path: str, key: str) -> FileSummary | None:
        e = self.entries.get(path)
        if e is not None and e[0] == key:
            self.hits += 1
            return e[1]
        return None

    def put(self, path: str, key: str, summary: FileSummary) -> None:
        self.entries[path] = (key, summary)
        self.dirty = True

    def save(self) -> None:
        if not self.dirty:
            return
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            gi = self.directory / ".gitignore"
            if not gi.exists():
                gi.write_text("# Automatically created by mend.\n*\n")
            fd, tmp = tempfile.mkstemp(dir=self.file.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(self.entries, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self.file)
        except OSError:
            pass  # a cache that cannot be written only costs time


class RunCache:
    """Whole-run results: the diagnostics of the last runs, keyed by their inputs (see
    :func:`mend.analyzers.static.engine.check_paths`). Small, so that a warm run stays fast."""

    MAX_RUNS = 32

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.file = directory / "check" / f"runs-v{__version__}.pickle"

    def _load(self) -> dict:
        try:
            with open(self.file, "rb") as fh:
                data = pickle.load(fh)
            return data if isinstance(data, dict) else {}
        except (OSError, EOFError, pickle.UnpicklingError, AttributeError, ImportError, ValueError, TypeError):
            return {}

    def get(self, key: str) -> dict | None:
        return self._load().get(key)

    def put(self, key: str, value: dict) -> None:
        runs = self._load()
        runs.pop(key, None)
        runs[key] = value
        while len(runs) > self.MAX_RUNS:
            runs.pop(next(iter(runs)))
        try:
            self.file.parent.mkdir(parents=True, exist_ok=True)
            gi = self.directory / ".gitignore"
            if not gi.exists():
                gi.write_text("# Automatically created by mend.\n*\n")
            fd, tmp = tempfile.mkstemp(dir=self.file.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(runs, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, self.file)
        except OSError:
            pass
