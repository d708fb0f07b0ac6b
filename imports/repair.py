"""The cold path: repair one module of a package with ``mend fix`` (the engine, config and policies of
``mend fix``), for a cache entry.

A package is checked as ``mend fix PACKAGE_DIR`` checks it: the whole package is the tree, so a helper in
one module is traced when a ``forward`` in another calls it (:class:`PackageContext`, built once per
process and package on the first cache miss; the analyzer's per-file summaries are cached in the repair
cache's ``static/`` folder). A module with findings is then repaired as ``mend fix`` repairs that file
(:func:`mend.rewriter.window.fix_windowed`, re-checked against the same package); one without findings is
an ``unchanged`` entry. Imported only on a cache miss (it loads LibCST and the analyzer); never imports
torch.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

from mend.analyzers.paths import within
from mend.imports.cache import FAILED, REPAIRED, UNCHANGED, AppliedChange, Entry
from mend.imports.settings import ENV_VAR, RepairSettings


class PackageContext:
    """One package as ``mend fix`` sees it: config, fix options, call graph (project) and findings."""

    def __init__(self, package_dir: str, settings: RepairSettings, cache_folder: Path) -> None:
        from mend.analyzers import static
        from mend.rewriter.api import options_from_config
        from mend.rewriter.options import FixOptions

        self.static = static
        self.config, use_cache = package_config(settings, cache_folder)
        # repaired modules live in the cache, not in the package: they import the helpers from mend itself
        self.options = options_from_config(getattr(self.config, "raw", {}) or {}, FixOptions(unsafe=settings.unsafe),
                                           settings.side_effects, helpers="import")
        files = static.discover_files([package_dir], self.config)
        self.display = {os.path.realpath(f): str(f) for f in files}  # real path -> the path the analyzer knows
        if use_cache:
            check_in_helper_process(package_dir, settings, cache_folder)
        result = static.check_paths([package_dir], self.config, jobs=1, use_cache=use_cache, need_project=True)
        self.project = result.project
        self.sites: dict[str, list[Any]] = {}
        for d in result.diagnostics:
            self.sites.setdefault(os.path.realpath(d.path), []).append(d)
        if settings.from_run:
            from mend.rewriter.api import runtime_diagnostics

            recorded, _ = runtime_diagnostics(settings.from_run, [Path(package_dir)], [Path(f) for f in files])
            for d in recorded:
                self.sites.setdefault(os.path.realpath(d.path), []).append(d)

    def repair(self, module: str, real_path: str, source: bytes, key: str, digest: str) -> Entry:
        """The cache entry for one module (its text repaired, or unchanged, or failed with the reason)."""
        from mend.version import __version__

        t0 = time.perf_counter()
        entry = Entry(key=key, module=module, path=real_path, source_sha256=digest, status=UNCHANGED, mend=__version__)
        try:
            self._repair(entry, real_path, source)
        except Exception as exc:  # a repair that fails must never break the import: load the original
            entry.status, entry.error, entry.text = FAILED, f"{type(exc).__name__}: {exc}"[:500], ""
        entry.seconds = round(time.perf_counter() - t0, 3)
        return entry

    def _repair(self, entry: Entry, real_path: str, source: bytes) -> None:
        from mend.analyzers.static.source import UnreadableSource, decode
        from mend.rewriter.results import line_map
        from mend.rewriter.window import fix_windowed

        display = self.display.get(real_path, real_path)
        diags = _unique([_with_path(d, display) for d in self.sites.get(real_path, [])])
        if not diags:
            return
        try:
            text = decode(source).text
        except UnreadableSource as exc:
            entry.status, entry.error = FAILED, f"cannot read: {exc}"
            return

        def diagnose(new_text: str) -> list[Any]:
            return list(self.static.check_source(new_text, display, self.config, self.project))

        res = fix_windowed(text, display, diags, self.options, diagnose)
        entry.remaining = len(res.remaining)
        if res.error:
            entry.status, entry.error = FAILED, res.error
            return
        if not res.changed:
            return
        compile(res.fixed, real_path, "exec", dont_inherit=True)  # a result that does not compile is not used
        entry.status, entry.text = REPAIRED, res.fixed
        entry.line_map = line_map(text, res.fixed)
        entry.applied = [AppliedChange(a.code, a.line, a.col, a.message, a.applicability) for a in res.applied]


def package_config(settings: RepairSettings, cache_folder: Path) -> tuple[Any, bool]:
    """The analyzer's config for a package under ``settings`` (the ``[tool.mend]`` config ``mend fix`` would use,
    its cache in the repair cache's ``static/`` folder), and whether that cache may be used (not where a link
    leads it out of the repair cache)."""
    from mend.analyzers import static

    config = static.load_config([settings.root], config_file=settings.config_file, isolated=settings.isolated)
    static_cache = cache_folder / "static"
    return dataclasses.replace(config, cache_dir=static_cache), within(static_cache, [cache_folder])


def check_in_helper_process(package_dir: str, settings: RepairSettings, cache_folder: Path) -> bool:
    """Check the package on every core in a process of its own (``python -m mend.imports.repair``), which fills
    the analyzer's cache that the check in this process then reads. Not in this process: a pool of workers
    started from the user's program would run its ``__main__`` again. Any failure only leaves the work to the
    check in this process (one core). True when the helper process succeeded."""
    import subprocess
    import sys

    if (os.cpu_count() or 1) < 2:
        return False
    env = {k: v for k, v in os.environ.items() if k != ENV_VAR}  # the helper repairs nothing at import
    command = [sys.executable, "-m", "mend.imports.repair", settings.to_env(), package_dir, str(cache_folder)]
    try:
        done = subprocess.run(command, env=env, cwd=os.getcwd(), stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=HELPER_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


HELPER_TIMEOUT_S = 900  # past this, the check in the user's process does the rest


def _main(argv: list[str]) -> int:
    """The helper process: check ``PACKAGE_DIR`` with ``SETTINGS`` on every core, filling the cache."""
    from mend.analyzers import static

    settings, package_dir, cache_folder = RepairSettings.from_env(argv[0]), argv[1], Path(argv[2])
    config, use_cache = package_config(settings, cache_folder)
    if use_cache:
        static.check_paths([package_dir], config, jobs=None, use_cache=True, need_project=True)
    return 0


def _with_path(d: Any, path: str) -> Any:
    if d.path == path:
        return d
    data = d.to_dict()
    data["path"] = path
    return type(d).from_dict(data)


def _unique(diags: list[Any]) -> list[Any]:
    seen: dict[tuple, Any] = {}
    for d in diags:
        seen.setdefault((d.code, d.line, d.col, d.end_line, d.end_col, d.source), d)
    return list(seen.values())


def recorded_sites(data_file: str) -> dict[str, str]:
    """Real path -> a fingerprint of the sites a ``mend run`` data file recorded in that file (standard
    library only: it is part of the cache key, computed on the warm path)."""
    import hashlib
    import json

    try:
        raw = json.loads(Path(data_file).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    root = str(raw.get("root") or ".")
    per_file: dict[str, list[str]] = {}
    for site in [*raw.get("breaks", []), *raw.get("recompiles", [])]:
        if not isinstance(site, dict) or site.get("in_library") or not site.get("path"):
            continue
        real = os.path.realpath(os.path.join(root, site["path"]))
        what = {k: site.get(k) for k in ("line", "gb_type", "registry_id", "kind", "guard", "message")}
        per_file.setdefault(real, []).append(json.dumps(what, sort_keys=True))
    return {p: hashlib.sha256("\n".join(sorted(v)).encode()).hexdigest() for p, v in per_file.items()}


__all__ = ["PackageContext", "check_in_helper_process", "package_config", "recorded_sites"]

if __name__ == "__main__":
    import sys

    sys.exit(_main(sys.argv[1:]))
