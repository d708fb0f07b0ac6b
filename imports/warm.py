"""Fill the repair cache ahead of time: ``mend repair-cache warm transformers`` (for a CI image or a cluster's
shared cache), so that no process pays the first import's repair.

Every source file of the chosen packages goes through the same path an import takes (:class:`RepairHook`:
same key, same repair, same cache entry, the compiled code stored too), without executing any of them.
The key includes the ``[tool.mend]`` config found from ``root`` (the folder the program starts in), so warm
from the folder the program runs in (or use ``isolated``/``config_file`` on both sides).
"""

from __future__ import annotations

import importlib.util
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from mend.imports.cache import REPAIRED
from mend.imports.hook import RepairHook
from mend.imports.settings import RepairSettings


@dataclass
class WarmReport:
    statuses: Counter = field(default_factory=Counter)  # repaired / unchanged / failed -> modules
    new: int = 0  # entries this run added (the others were cached already)
    seconds: float = 0.0
    missing: list[str] = field(default_factory=list)  # packages not installed
    errors: list[tuple[str, str]] = field(default_factory=list)  # (module, why it would load unchanged)


def package_modules(package: str) -> list[tuple[str, str, bool]]:
    """(module name, file, is a package) of every ``.py`` file of an installed package, without importing
    it (a dotted name imports its parents, as ``importlib.util.find_spec`` does)."""
    spec = importlib.util.find_spec(package)
    if spec is None:
        return []
    if not spec.submodule_search_locations:  # a one-file module
        return [(package, spec.origin, False)] if str(spec.origin).endswith(".py") else []
    out = []
    for base in spec.submodule_search_locations:
        for folder, dirs, files in os.walk(base):
            rel = Path(folder).relative_to(base).parts
            dirs[:] = sorted(d for d in dirs if d.isidentifier() and d != "__pycache__")  # importable folders
            prefix = ".".join((package, *rel))
            for name in sorted(files):
                stem = name[:-3]
                if not name.endswith(".py") or not stem.isidentifier():
                    continue
                is_pkg = stem == "__init__"
                out.append((prefix if is_pkg else f"{prefix}.{stem}", os.path.join(folder, name), is_pkg))
    return out


def warm(settings: RepairSettings) -> WarmReport:
    """Repair (or find cached) every module of ``settings.packages``; returns what happened."""
    t0 = time.perf_counter()
    hook = RepairHook(settings)
    before = {e.key for e in hook.cache.iter_entries()}
    report = WarmReport()
    for package in settings.packages:
        modules = package_modules(package)
        if not modules:
            report.missing.append(package)
        for module, path, is_pkg in modules:
            try:
                source = Path(path).read_bytes()
            except OSError as exc:
                report.errors.append((module, f"cannot read {path}: {exc}"))
                continue
            entry = hook.entry_for(module, path, source, is_pkg)
            if entry is None:
                continue
            report.statuses[entry.status] += 1
            if entry.status == REPAIRED:
                try:
                    hook.code_for(entry, path)  # the compiled code is cached too
                except Exception as exc:  # noqa: BLE001 - the import would load the original: say why
                    report.errors.append((module, f"{type(exc).__name__}: {exc}"))
    report.errors.extend(hook.errors)
    report.new = sum(1 for e in hook.cache.iter_entries() if e.key not in before)
    report.seconds = time.perf_counter() - t0
    return report


__all__ = ["WarmReport", "package_modules", "warm"]
