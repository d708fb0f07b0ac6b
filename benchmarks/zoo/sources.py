"""The zoo's sources: the installed package ("original") and copies repaired by ``mend fix``.

The package is the suite's (:mod:`benchmarks.zoo.suites`): transformers for the zoo proper, torchvision, timm,
diffusers or torch_geometric for the library corpora; for the ``repos`` suite it is a folder of checkouts
(not imported: each driver puts its repository on ``sys.path``), and ``mend fix`` repairs the files the
manifest names as the model's (the scope).

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


def package_dir(package: str = PACKAGE) -> Path:
    """The installed package's folder, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError(f"{package} is not installed")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package.replace("_", "-"))
    except importlib.metadata.PackageNotFoundError:
        return importlib.metadata.version(package)


def _tree_hash(folders: Sequence[Path]) -> str:
    h = hashlib.sha256()
    for folder in folders:
        for p in sorted(folder.rglob("*.py")):
            if "__pycache__" in p.parts or not p.is_file():
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


def cache_key(options: dict[str, bool], scope: Sequence[str] | None, package: str = PACKAGE,
              folder: Path | None = None) -> str:
    what = {"folder": _tree_hash([folder])} if folder is not None else {"package": package, "version": _version(package)}
    parts = {**what, "mend": mend_hash(), "options": options, "scope": sorted(scope) if scope else None}
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
            check_idempotent: bool = True, log: Callable[[str], None] = print, package: str = PACKAGE,
            folder: Path | None = None) -> SourceInfo:
    """The source ``name`` ready to run: the installed ``package`` (or the ``folder`` of checkouts), or a
    repaired copy of it (made or reused)."""
    if name not in SOURCES:
        raise ValueError(f"unknown source {name!r}; choose from {', '.join(SOURCES)}")
    options = SOURCES[name]
    origin = folder.resolve() if folder is not None else package_dir(package)
    if options is None:
        return SourceInfo(name=name, path=str(origin))
    if folder is not None and name == "hook":
        raise ValueError("the import hook repairs packages, not a folder of checkouts")
    cache_dir = Path(cache_dir or default_cache_dir())
    key = cache_key(options, scope, package, folder)
    stem = origin.name
    final = cache_dir / f"{name}-{key}" if package == PACKAGE and folder is None else cache_dir / f"{stem}-{name}-{key}"
    info = SourceInfo(name=name, path=str(final / stem), pythonpath=None if folder is not None else str(final),
                      unsafe=options["unsafe"], key=key)
    meta = final / "fix.json"
    if meta.exists():
        info.fix = FixSummary(**json.loads(meta.read_text()))
        log(f"[{name}] reusing {final}")
        return info
    staging = cache_dir / f".{name}-{key}-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    log(f"[{name}] copying {origin} and running mend fix{' --unsafe-fixes' if options['unsafe'] else ''}"
        f"{' on ' + str(len(scope)) + ' paths' if scope else ''} ...")
    shutil.copytree(origin, staging / stem, ignore=shutil.ignore_patterns("__pycache__", ".git"), symlinks=True)
    info.fix = run_fix(staging / stem, options, scope, check_idempotent)
    (staging / "fix.json").write_text(json.dumps(asdict(info.fix), indent=1))
    try:
        os.rename(staging, final)
    except OSError:  # made meanwhile by another run: keep that one
        shutil.rmtree(staging, ignore_errors=True)
        info.fix = FixSummary(**json.loads(meta.read_text()))
    log(f"[{name}] mend fix: {info.fix.seconds:.0f} s, {info.fix.changed} files changed, "
        f"{len(info.fix.errors)} errors")
    return info
