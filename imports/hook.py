"""The meta-path import hook: modules of the chosen packages load with their ``mend fix`` repair.

:class:`RepairHook` is a finder first on ``sys.meta_path``. For a module of a chosen package it asks the
finders after it for the normal spec and, when that spec loads a ``.py`` file, swaps in a
:class:`RepairLoader`: a ``SourceFileLoader`` for the same file whose ``get_code`` and ``get_source``
give the repaired module. Per import, the warm path reads the source, hashes it, reads the cache entry
and (for a repaired module) its compiled code: no LibCST, no analyzer, no torch. A miss repairs the
module (:mod:`mend.imports.repair`) and stores the entry.

What a repaired module looks like from outside:

* ``__file__``, ``co_filename`` and tracebacks name the original file; the repaired text is registered
  in ``linecache`` under that name (as an entry that ``linecache.checkcache`` keeps), so tracebacks,
  ``inspect.getsource`` and pdb show the repaired lines, at the repaired line numbers; an uncaught
  exception too (:func:`print_uncaught`: before Python 3.13 the interpreter's own printer reads the
  lines from the file on disk, the original's, not from ``linecache``);
* the original file's ``__pycache__`` is never written with repaired code (a plain import later loads
  the original);
* :attr:`RepairHook.loaded` keeps every module the hook served, with what was changed and the line map
  from repaired to original lines (``mend run`` uses it to report breaks at original lines).

A module that cannot be repaired (mend cannot parse it, a fix fails, the cache cannot be written) loads
unchanged; the reason is kept in :attr:`RepairHook.errors`, never raised.
"""

from __future__ import annotations

import _imp
import linecache
import os
import sys
import threading
from importlib.machinery import ModuleSpec, SourceFileLoader
from pathlib import Path
from types import CodeType
from typing import Any

from mend.imports.cache import (
    REPAIRED,
    Entry,
    RepairCache,
    config_fingerprint,
    entry_key,
    mend_fingerprint,
    package_fingerprint,
)
from mend.imports.settings import RepairSettings, default_cache_dir


class RepairHook:
    """The finder on ``sys.meta_path`` for one set of :class:`RepairSettings`."""

    def __init__(self, settings: RepairSettings) -> None:
        self.settings = settings
        self.cache = RepairCache(settings.cache_dir or default_cache_dir())
        self.loaded: dict[str, Entry] = {}  # module file as loaded (spec.origin) -> its entry
        self.errors: list[tuple[str, str]] = []  # (module, why it loaded unchanged)
        self._contexts: dict[str, Any] = {}
        self._sites: dict[str, str] | None = None
        self._parts: dict[str, str] = {}
        self._lock = threading.RLock()
        self._busy = threading.local()
        if self.cache.untrusted:  # modules are still repaired, in memory, at every start
            self.errors.append(("<repair cache>", f"not used: {self.cache.untrusted}"))
            sys.stderr.write(f"mend: the repair cache is not used: {self.cache.untrusted}\n")

    # -- the finder --------------------------------------------------------------------------------
    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if not self.settings.covers(fullname) or getattr(self._busy, "on", False):
            return None
        self._busy.on = True  # the finders asked below must not come back here
        try:
            spec = self._normal_spec(fullname, path, target)
        finally:
            self._busy.on = False
        if spec is None or type(spec.loader) is not SourceFileLoader or not str(spec.origin).endswith(".py"):
            return None  # not a source file (an extension, a namespace package): the normal import
        spec.loader = RepairLoader(fullname, spec.origin, self)
        return spec

    def _normal_spec(self, fullname: str, path: Any, target: Any) -> ModuleSpec | None:
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                return spec
        return None

    def invalidate_caches(self) -> None:
        """``importlib.invalidate_caches()``: the packages may have changed on disk."""
        self._contexts.clear()
        self._parts.clear()

    # -- entries -----------------------------------------------------------------------------------
    def entry_for(self, fullname: str, origin: str, source: bytes, is_package: bool) -> Entry | None:
        """The cache entry of a module (made on a miss); None, with the reason kept, when that fails."""
        try:
            real = os.path.realpath(origin)
            package_dir = _package_dir(real, fullname, is_package, self.settings)
            key, digest = entry_key(source, real, self._key_parts(package_dir), self._recorded_sites().get(real, ""))
            entry = self.cache.get(key)
            if entry is None:
                entry = self._repair(fullname, real, package_dir, source, key, digest)
        except Exception as exc:  # the hook must never break an import
            self.errors.append((fullname, f"{type(exc).__name__}: {exc}"))
            return None
        if entry.error:
            self.errors.append((fullname, entry.error))
        self.loaded[origin] = entry
        return entry

    def _repair(self, fullname: str, real: str, package_dir: str, source: bytes, key: str, digest: str) -> Entry:
        with self._lock:
            self._busy.on = True  # what the repair imports is not repaired
            try:
                context = self._contexts.get(package_dir)
                if context is None:
                    from mend.imports.repair import PackageContext

                    context = self._contexts[package_dir] = PackageContext(package_dir, self.settings,
                                                                           self.cache.folder)
                entry = context.repair(fullname, real, source, key, digest)
            finally:
                self._busy.on = False
        try:
            self.cache.put(entry)
        except OSError as exc:  # a read-only cache: the entry still serves this process
            self.errors.append((fullname, f"cannot write the repair cache: {exc}"))
        return entry

    def _key_parts(self, package_dir: str) -> str:
        """The part of every key that does not depend on the module: mend, options, config, package."""
        parts = self._parts.get(package_dir)
        if parts is None:
            s = self.settings
            parts = self._parts[package_dir] = "\0".join([
                mend_fingerprint(), s.fix_fingerprint(), config_fingerprint(s.root, s.config_file, s.isolated),
                package_fingerprint(package_dir)])
        return parts

    def _recorded_sites(self) -> dict[str, str]:
        if self._sites is None:
            from mend.imports.repair import recorded_sites

            self._sites = recorded_sites(self.settings.from_run) if self.settings.from_run else {}
        return self._sites

    def code_for(self, entry: Entry, origin: str) -> CodeType:
        """The compiled repaired module, from the cache (compiled and stored on a miss)."""
        code = self.cache.get_code(entry.key)
        if code is None:
            code = compile(entry.text, origin, "exec", dont_inherit=True)
            try:
                self.cache.put_code(entry.key, code)
            except OSError:
                pass
        else:
            _imp._fix_co_filename(code, origin)
        register_source(origin, entry.text)
        return code

    # -- reporting ---------------------------------------------------------------------------------
    def repaired(self) -> list[Entry]:
        return [e for e in self.loaded.values() if e.status == REPAIRED]

    def original_line(self, filename: str, line: int) -> int:
        """The original file's line for ``line`` of a loaded module's file (unchanged for other files)."""
        entry = self.loaded.get(filename) or self._by_real().get(os.path.realpath(filename))
        return entry.original_line(line) if entry is not None else line

    def _by_real(self) -> dict[str, Entry]:
        return {e.path: e for e in self.loaded.values()}


class RepairLoader(SourceFileLoader):
    """Loads one module's repaired code (``SourceFileLoader`` for everything else)."""

    def __init__(self, fullname: str, path: str, hook: RepairHook) -> None:
        super().__init__(fullname, path)
        self.hook = hook
        self._memo: Entry | None = None

    def _entry(self, fullname: str) -> Entry | None:
        if self._memo is None:
            try:
                source = self.get_data(self.path)
            except OSError:
                return None
            self._memo = self.hook.entry_for(fullname, self.path, source, self.is_package(fullname))
        return self._memo

    def get_code(self, fullname: str) -> CodeType | None:
        entry = self._entry(fullname)
        if entry is not None and entry.status == REPAIRED:
            try:
                return self.hook.code_for(entry, self.path)
            except Exception as exc:  # a cache or compile problem: the original module
                self.hook.errors.append((fullname, f"{type(exc).__name__}: {exc}"))
        return super().get_code(fullname)

    def get_source(self, fullname: str) -> str | None:
        entry = self._entry(fullname)
        if entry is not None and entry.status == REPAIRED:
            return entry.text
        return super().get_source(fullname)


def register_source(filename: str, text: str) -> None:
    """Make ``linecache`` (tracebacks, ``inspect``, pdb) read ``text`` for ``filename``.

    An entry whose modification time is None is one ``linecache.checkcache`` keeps (as for a module
    loaded by a loader with ``get_source``)."""
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines[-1] += "\n"
    linecache.cache[filename] = (len(text), None, lines, filename)


def print_uncaught(exc_type: type[BaseException], value: BaseException, tb: Any) -> None:
    """``sys.excepthook`` while modules load repaired: the traceback printed as the interpreter prints it,
    its lines read through ``linecache`` (the repaired text of a repaired module, :func:`register_source`)."""
    import traceback

    traceback.print_exception(exc_type, value, tb)


def _package_dir(real: str, fullname: str, is_package: bool, settings: RepairSettings) -> str:
    """The folder of the chosen package that holds a module (the file itself for a one-file module)."""
    chosen = max((p for p in settings.packages if settings.covers(fullname) and
                  (fullname == p or fullname.startswith(p + "."))), key=len)
    depth = fullname.count(".") - chosen.count(".")  # levels below the chosen package
    if not is_package and depth == 0:
        return real
    folder = Path(real).parent
    for _ in range(depth - (0 if is_package else 1)):
        folder = folder.parent
    return str(folder)


__all__ = ["RepairHook", "RepairLoader", "print_uncaught", "register_source"]
