"""The zoo's sources: the installed transformers ("original") and copies repaired by ``mend fix``.

A repaired copy is made once and reused: it lives in the cache folder under a key made of transformers'
version, a hash of mend's rewriter and analyzer sources, the fix options and the scope (which parts of the
package were fixed). Making one: copy the package, run ``mend.rewriter.api.fix_paths`` over it, check that
every changed file parses and (by default) that a second ``mend fix`` would change nothing, and write
``fix.json`` (time, files changed, fixes applied, per-file errors). The folder appears under its final
name only when complete, so an interrupted run leaves nothing half-made. Workers import a copy through
``PYTHONPATH``. No torch import here.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.metadata
import importlib.util
import json
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict
from pathlib import Path

from benchmarks.zoo.records import FixSummary, SourceInfo
from mend import settings

PACKAGE = "transformers"
# source name -> mend fix options (None: the installed package); "hook": the installed package repaired at
# import by mend's import hook (safe fixes; the worker installs it)
SOURCES: dict[str, dict[str, bool] | None] = {"original": None, "safe": {"unsafe": False}, "unsafe": {"unsafe": True},
                                              "hook": None}


def default_cache_dir() -> Path:
    env = settings.ZOO_CACHE.get()
    if env is not None:
        return env
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "mend" / "zoo"


def package_dir() -> Path:
    """The installed package's folder, found without importing it."""
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"{PACKAGE} is not installed")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def _tree_hash(folders: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for folder in folders:
        for p in sorted(folder.rglob("*.py")):
            if "__pycache__" in p.parts:
                continue
            h.update(p.relative_to(folder).as_posix().encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def mend_hash() -> str:
    """A hash of the code that decides what ``mend fix`` writes: the rewriter and the analyzers."""
    folders = []
    for mod in ("mend.rewriter", "mend.analyzers"):
        spec = importlib.util.find_spec(mod)
        assert spec is not None and spec.submodule_search_locations
        folders.append(Path(next(iter(spec.submodule_search_locations))))
    return _tree_hash(folders)


def cache_key(options: dict[str, bool], scope: Sequence[str] | None) -> str:
    parts = {"package": PACKAGE, "version": importlib.metadata.version(PACKAGE), "mend": mend_hash(),
             "options": options, "scope": sorted(scope) if scope else None}
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()[:16]


def _unparsable(paths: Sequence[str]) -> list[str]:
    bad = []
    for p in paths:
        try:
            ast.parse(Path(p).read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError, OSError):
            bad.append(p)
    return bad


def run_fix(package: Path, options: dict[str, bool], scope: Sequence[str] | None,
            check_idempotent: bool = True) -> FixSummary:
    """``mend fix`` over a copy of the package (or the ``scope`` paths inside it), with the checks."""
    from mend.rewriter.api import fix_paths
    from mend.rewriter.options import FixOptions

    targets = [package / s for s in scope] if scope else [package]
    rel = lambda p: os.path.relpath(p, package)  # noqa: E731
    files = sum(1 for t in targets for _ in (t.rglob("*.py") if t.is_dir() else [t]))
    t0 = time.perf_counter()
    run = fix_paths(targets, FixOptions(**options), isolated=True)
    summary = FixSummary(seconds=round(time.perf_counter() - t0, 2), files=files, changed=len(run.written),
                         changed_files=sorted(rel(p) for p in run.written),
                         applied=run.applied, remaining=run.remaining,
                         errors=[[rel(p), msg] for p, msg in run.errors],
                         unparsable=[rel(p) for p in _unparsable(run.written)],
                         scope=list(scope) if scope else None)
    if check_idempotent:
        t0 = time.perf_counter()
        again = fix_paths(targets, FixOptions(**options), isolated=True, write=False)
        summary.second_run_seconds = round(time.perf_counter() - t0, 2)
        summary.second_run_changed = sorted(rel(f.path) for f in again.changed)
    return summary


def prepare(name: str, cache_dir: Path | None = None, scope: Sequence[str] | None = None,
            check_idempotent: bool = True, log: Callable[[str], None] = print) -> SourceInfo:
    """The source ``name`` ready to run: the installed package, or a repaired copy (made or reused)."""
    if name not in SOURCES:
        raise ValueError(f"unknown source {name!r}; choose from {', '.join(SOURCES)}")
    options = SOURCES[name]
    if options is None:
        return SourceInfo(name=name, path=str(package_dir()))
    cache_dir = Path(cache_dir or default_cache_dir())
    key = cache_key(options, scope)
    final = cache_dir / f"{name}-{key}"
    info = SourceInfo(name=name, path=str(final / PACKAGE), pythonpath=str(final), unsafe=options["unsafe"], key=key)
    meta = final / "fix.json"
    if meta.exists():
        info.fix = FixSummary(**json.loads(meta.read_text()))
        log(f"[{name}] reusing {final}")
        return info
    staging = cache_dir / f".{name}-{key}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    log(f"[{name}] copying {package_dir()} and running mend fix{' --unsafe-fixes' if options['unsafe'] else ''}"
        f"{' on ' + ', '.join(scope) if scope else ''} ...")
    shutil.copytree(package_dir(), staging / PACKAGE, ignore=shutil.ignore_patterns("__pycache__"))
    info.fix = run_fix(staging / PACKAGE, options, scope, check_idempotent)
    (staging / "fix.json").write_text(json.dumps(asdict(info.fix), indent=1))
    try:
        os.rename(staging, final)
    except OSError:  # made meanwhile by another run: keep that one
        shutil.rmtree(staging, ignore_errors=True)
        info.fix = FixSummary(**json.loads(meta.read_text()))
    log(f"[{name}] mend fix: {info.fix.seconds:.0f} s, {info.fix.changed} files changed, "
        f"{len(info.fix.errors)} errors")
    return info
