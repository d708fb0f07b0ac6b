"""The per-file result cache of ``mend check``.

One JSON file per mend version under ``<cache dir>/check/``, mapping each file path to the key of its
last analysis and the resulting :class:`FileSummary`, in the tagged form of
:mod:`mend.analyzers.static.datacodec` (a cache in the repository is data that anyone with a commit
wrote: nothing read from it can run code). The key is a hash of the file's bytes, its
module name, the analysis-relevant configuration and a fingerprint of mend's analyzer sources (so
editing a rule invalidates the cache even without a version bump). Rule selection, ``noqa`` and
``per-file-ignores`` are applied after the cache, so changing them never needs a re-analysis.

The cache directory defaults to ``.mend_cache/`` beside the configuration root (the folder holding
the ``pyproject.toml`` with ``[tool.mend]``), else the current directory; it gets its own
``.gitignore``. Writes are atomic (temporary file + rename); a cache that cannot be read or decoded, or
holds anything but what mend writes (a non-regular file, another type, a wrong field), is treated as
empty and written again.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
from pathlib import Path

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static import datacodec
from mend.analyzers.static.summary import FileSummary
from mend.safeio import read_regular
from mend.version import __version__

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
        self.file = directory / "check" / f"v{__version__}.json"
        self.entries: dict[str, tuple[str, FileSummary]] = {}
        self.dirty = False
        self.hits = 0

    def load(self) -> None:
        data = _read(self.file)
        ok = isinstance(data, dict) and all(
            isinstance(k, str) and isinstance(e, tuple) and len(e) == 2 and isinstance(e[0], str)
            and isinstance(e[1], FileSummary) for k, e in data.items())
        self.entries = data if ok else {}

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
        save_data(self.directory, self.file, self.entries)  # one that cannot be written only costs time


class RunCache:
    """Whole-run results: the diagnostics of the last runs, keyed by their inputs (see
    :func:`mend.analyzers.static.engine.check_paths`). Small, so that a warm run stays fast."""

    MAX_RUNS = 32

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.file = directory / "check" / f"runs-v{__version__}.json"

    def _load(self) -> dict:
        data = _read(self.file)
        ok = isinstance(data, dict) and all(
            isinstance(k, str) and isinstance(v, dict) and isinstance(v.get("deps"), list)
            and isinstance(v.get("lines"), int) and isinstance(v.get("diagnostics"), list)
            and all(isinstance(d, Diagnostic) for d in v["diagnostics"]) for k, v in data.items())
        return data if ok else {}

    def get(self, key: str) -> dict | None:
        return self._load().get(key)

    def put(self, key: str, value: dict) -> None:
        runs = self._load()
        runs.pop(key, None)
        runs[key] = value
        while len(runs) > self.MAX_RUNS:
            runs.pop(next(iter(runs)))
        save_data(self.directory, self.file, runs)


class FixDecisions:
    """What ``mend fix`` decided for each finding of a file's bytes: ``{site: None}`` where it applies a
    fix, ``{site: reason}`` where it declines, keyed by ``"<mode>:<digest of the bytes>"`` (see
    :mod:`mend.analyzers.static.fixability`). ``mend fix`` writes it, ``mend check`` reads it, so ``[*]``
    says what ``mend fix`` does. The most recent files are kept."""

    MAX_FILES = 4096

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.file = directory / "check" / f"fixes-v{__version__}.json"

    def load(self) -> dict[str, dict[str, str | None]]:
        data = _read(self.file)
        ok = isinstance(data, dict) and all(
            isinstance(k, str) and isinstance(v, dict)
            and all(isinstance(s, str) and (r is None or isinstance(r, str)) for s, r in v.items())
            for k, v in data.items())
        return data if ok else {}

    def update(self, decided: dict[str, dict[str, str | None]]) -> None:
        """Merge ``decided`` (key -> site -> decision) into the store and write it."""
        if not decided:
            return
        known = self.load()
        for key, sites in decided.items():
            merged = {**known.pop(key, {}), **sites}
            known[key] = merged  # most recent last
        while len(known) > self.MAX_FILES:
            known.pop(next(iter(known)))
        save_data(self.directory, self.file, known)  # if it cannot be written, check says "undecided"


MAX_BYTES = 256 << 20  # a cache file larger than this is not read (it is not one mend wrote for a real tree)


def save_data(directory: Path, path: Path, value) -> bool:
    """Write ``value`` to ``path`` (a file under the cache folder ``directory``) atomically, in the tagged
    JSON of :mod:`~mend.analyzers.static.datacodec`, the folder getting its ``.gitignore`` first; False
    when it cannot be written (a cache that cannot be written only costs time)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        ignore = directory / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# Automatically created by mend.\n*\n")
        _write(path, value)
    except (OSError, datacodec.DataError):
        return False
    return True


def load_data(path: Path):
    """The value :func:`save_data` wrote to ``path``, or None (see :func:`_read`)."""
    return _read(path)


def _read(path: Path):
    """The value in ``path``, or None: a missing, non-regular (a FIFO would block), oversized, unreadable
    or undecodable file is no cache."""
    data = read_regular(path, MAX_BYTES)
    if data is None:
        return None
    try:
        return datacodec.loads(data)
    except datacodec.DataError:
        return None


def _write(path: Path, value) -> None:
    text = datacodec.dumps(value)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
