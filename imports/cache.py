"""The repair cache: repaired modules on disk, keyed by what decides their text.

An entry's key is a hash of

* the original file's bytes (sha256) and its real path (the module name and package come from it);
* mend's version and code: the version plus the size and modification time of every source file of
  the rewriter, the static analyzer and the repair step (:func:`mend_fingerprint`; a changed or reinstalled
  mend is a new key);
* the fix options (:meth:`RepairSettings.fix_fingerprint`) and every ``pyproject.toml`` from the program's
  folder up (the ``[tool.mend]`` config ``mend fix`` would read; :func:`config_fingerprint`);
* the package it belongs to (:func:`package_fingerprint`: path, size and modification time of each of its
  ``.py`` files), since which functions are traced depends on their callers in other modules;
* the recorded sites inside this file, with ``--from-run``.

An entry is one JSON file (``entries/ab/<key>.json``: status, the repaired text, the fixes applied at their
original lines, the line map, its signature) plus the compiled code for this Python
(``<key>.<cache_tag>.code``: its signature, then ``marshal``). Both are signed with a key only their
writers hold and checked before use (:mod:`mend.imports.trust`): a tampered, replaced or planted entry is
a miss, never executed. Every file is written to a temporary name in the same folder and renamed over its final
name (``os.replace``), so a reader sees a whole file or none, and two processes that repair the same
module at once write the same bytes: the last rename wins and nothing is ever half-written. An entry that
cannot be read, decoded or verified, or is not a regular file, is a miss. Standard library only: the warm path of every import runs here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import marshal
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from types import CodeType
from typing import Any

from mend.imports import trust

FORMAT = 2  # 2: signed entries
UNCHANGED, REPAIRED, FAILED = "unchanged", "repaired", "failed"


@dataclass
class AppliedChange:
    """One fix applied to a module, at the original file's line."""

    code: str
    line: int
    col: int
    message: str
    applicability: str


@dataclass
class Entry:
    """A module's repair: ``status`` unchanged (nothing to fix), repaired, or failed (loaded unchanged)."""

    key: str
    module: str
    path: str
    source_sha256: str
    status: str
    text: str = ""  # the repaired source (status repaired)
    applied: list[AppliedChange] = field(default_factory=list)
    remaining: int = 0
    error: str = ""
    line_map: list[int] = field(default_factory=list)  # repaired line i+1 -> original line
    seconds: float = 0.0
    mend: str = ""
    format: int = FORMAT

    def original_line(self, line: int) -> int:
        """The original file's line for ``line`` of the repaired text (the line itself when unchanged)."""
        if self.status != REPAIRED or not self.line_map:
            return line
        return self.line_map[min(max(line, 1), len(self.line_map)) - 1]

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str | bytes) -> Entry:
        """The entry :meth:`to_json` wrote; ValueError for anything else (another shape, a wrong type)."""
        raw = json.loads(text)
        if not isinstance(raw, dict) or not set(raw) <= _FIELDS or not _REQUIRED <= set(raw):
            raise ValueError("not a repair-cache entry")
        for name, types in _TYPES.items():
            if name in raw and (not isinstance(raw[name], types) or isinstance(raw[name], bool)):
                raise ValueError(f"entry field {name} has the wrong type")
        if raw["status"] not in (UNCHANGED, REPAIRED, FAILED) or not all(
                type(n) is int for n in raw.get("line_map", [])):
            raise ValueError("not a repair-cache entry")
        changes = raw.get("applied", [])
        if not all(isinstance(a, dict) and set(a) == _CHANGE_FIELDS for a in changes):
            raise ValueError("not a repair-cache entry")
        raw["applied"] = [AppliedChange(**a) for a in changes]
        return cls(**raw)


_TYPES: dict[str, type | tuple[type, ...]] = {
    "key": str, "module": str, "path": str, "source_sha256": str, "status": str, "text": str, "applied": list,
    "remaining": int, "error": str, "line_map": list, "seconds": (int, float), "mend": str, "format": int}
_FIELDS = set(_TYPES)
_REQUIRED = {"key", "module", "path", "source_sha256", "status"}
_CHANGE_FIELDS = {"code", "line", "col", "message", "applicability"}


def _stat_fingerprint(h: Any, places: list[Path]) -> None:
    """Feed ``h`` the path, size and modification time of every ``.py`` file in ``places`` (files or folders)."""
    for place in places:
        walk = [(str(place.parent), [], [place.name])] if place.is_file() else os.walk(place)
        for root, dirs, files in walk:
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(root, name)
                    try:
                        st = os.stat(path)
                    except OSError:
                        continue
                    h.update(f"{path}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())


_memo: dict[Any, str] = {}


def mend_fingerprint() -> str:
    """mend's version and the state of the code that decides a repaired text: the rewriter, the static
    analyzer, the diagnostic type and :mod:`mend.imports.repair` (found without importing them)."""
    if "mend" not in _memo:
        import importlib.util

        from mend.version import __version__

        def folder(name: str) -> Path:
            spec = importlib.util.find_spec(name)
            assert spec is not None and spec.submodule_search_locations
            return Path(next(iter(spec.submodule_search_locations)))

        analyzers = folder("mend.analyzers")
        h = hashlib.sha256(f"mend {__version__}\n".encode())
        _stat_fingerprint(h, [folder("mend.rewriter"), analyzers / "static", analyzers / "diagnostic.py",
                              Path(__file__).with_name("repair.py")])
        _memo["mend"] = h.hexdigest()
    return _memo["mend"]


def package_fingerprint(package_dir: str) -> str:
    """Path, size and modification time of every ``.py`` file of a package (the hook asks once per package)."""
    h = hashlib.sha256()
    _stat_fingerprint(h, [Path(package_dir)])
    return h.hexdigest()


def config_fingerprint(root: str, config_file: str | None, isolated: bool) -> str:
    """The bytes of the configuration files ``mend fix`` may read for a program started in ``root``."""
    h = hashlib.sha256()
    if not isolated:
        candidates = [Path(config_file)] if config_file else \
            [d / "pyproject.toml" for d in (Path(root).resolve(), *Path(root).resolve().parents)]
        for cand in candidates:
            with contextlib.suppress(OSError):
                h.update(str(cand).encode() + b"\0" + cand.read_bytes() + b"\0")
    return h.hexdigest()


def entry_key(source: bytes, path: str, *parts: str) -> tuple[str, str]:
    """(key, sha256 of ``source``) for a module at real path ``path``; ``parts``: the other fingerprints."""
    digest = hashlib.sha256(source).hexdigest()
    h = hashlib.sha256(f"{FORMAT}\0{digest}\0{path}".encode())
    for part in parts:
        h.update(b"\0" + part.encode())
    return h.hexdigest(), digest


class RepairCache:
    """The cache folder: ``entries/`` (see the module docstring) and ``static/`` (the analyzer's own cache
    of per-file summaries, used when a package's call graph is built). Every entry and every compiled
    module is signed (:mod:`mend.imports.trust`): one that does not verify is a miss. ``untrusted`` says
    why the cache is not used at all (its key cannot be trusted), else None."""

    def __init__(self, folder: str | os.PathLike[str]) -> None:
        self.folder = Path(folder)
        self.entries = self.folder / "entries"
        try:
            self.key, self.shared = trust.load_key()
            self.untrusted: str | None = None
        except (OSError, trust.UntrustedCache) as exc:
            self.key, self.shared, self.untrusted = b"", False, str(exc)

    def _paths(self, key: str) -> tuple[Path, Path]:
        base = self.entries / key[:2] / key
        return base.with_suffix(".json"), base.with_name(f"{key}.{sys.implementation.cache_tag}.code")

    def _read_entry(self, meta: Path) -> Entry | None:
        data = trust.read_regular(meta) if not self.untrusted else None
        if data is None:
            return None
        try:
            raw = json.loads(data)
            mac = raw.pop("mac", None) if isinstance(raw, dict) else None
            entry = Entry.from_json(json.dumps(raw))
        except (ValueError, TypeError, RecursionError):
            return None
        return entry if trust.verify(self.key, mac, entry.to_json().encode()) else None

    def get(self, key: str) -> Entry | None:
        entry = self._read_entry(self._paths(key)[0])
        return entry if entry is not None and entry.key == key and entry.format == FORMAT else None

    def put(self, entry: Entry) -> None:
        meta = self._paths(entry.key)[0]
        if self.untrusted or not self._inside(meta):
            return
        text = entry.to_json()
        signed = json.dumps({**json.loads(text), "mac": trust.sign(self.key, text.encode())}, sort_keys=True)
        atomic_write(meta, signed.encode("utf-8"), self._mode())

    def get_code(self, key: str) -> CodeType | None:
        data = trust.read_regular(self._paths(key)[1]) if not self.untrusted else None
        if data is None or len(data) < 65 or data[64:65] != b"\n":
            return None
        body = data[65:]
        if not trust.verify(self.key, data[:64].decode("ascii", "replace"), key.encode(), body):
            return None
        try:
            return marshal.loads(body)  # authenticated above (trust.verify)
        except (EOFError, ValueError, TypeError):
            return None

    def put_code(self, key: str, code: CodeType) -> None:
        path = self._paths(key)[1]
        if self.untrusted or not self._inside(path):
            return
        body = marshal.dumps(code)
        atomic_write(path, trust.sign(self.key, key.encode(), body).encode() + b"\n" + body, self._mode())

    def _mode(self) -> int:
        """Entries of a shared cache are readable by the group (the team holding its key)."""
        return 0o640 if self.shared else 0o600

    def _inside(self, path: Path) -> bool:
        """Whether writing ``path`` stays in the cache folder: a link in it never leads a write elsewhere
        (the entry is then not cached). Only on the write path: the warm path stays standard library."""
        from mend.analyzers.paths import within

        return within(path.parent, [self.folder])

    def iter_entries(self) -> Iterator[Entry]:
        """The entries that verify (a damaged or foreign one is left out)."""
        if not self.entries.is_dir():
            return
        for meta in sorted(self.entries.glob("*/*.json")):
            entry = self._read_entry(meta)
            if entry is not None:
                yield entry

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in self.folder.rglob("*") if p.is_file()) if self.folder.is_dir() else 0

    def clear(self) -> int:
        """Remove every entry (and the analyzer's cache); returns how many entries there were. A process
        reading meanwhile sees a miss, never a partial entry: the folder is renamed away first."""
        if not self.folder.is_dir():
            return 0
        count = sum(1 for _ in self.entries.glob("*/*.json")) if self.entries.is_dir() else 0
        for name in ("entries", "static"):
            part = self.folder / name
            if part.exists():
                trash = self.folder / f".trash-{name}-{os.getpid()}"
                os.replace(part, trash)
                shutil.rmtree(trash, ignore_errors=True)
        return count


def atomic_write(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same folder and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        if mode != 0o600:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


__all__ = ["FAILED", "REPAIRED", "UNCHANGED", "AppliedChange", "Entry", "RepairCache", "atomic_write",
           "config_fingerprint", "entry_key", "mend_fingerprint", "package_fingerprint"]
