"""The empty-cache start checks the package on every core in a helper process, whose cache the check in the
program's own process then reads; where the helper cannot run, the program's process checks on its own."""

from __future__ import annotations

import importlib
import os
import sys

import mend.imports as mi
from mend.analyzers import static
from mend.imports import repair
from mend.imports.cache import REPAIRED
from mend.imports.settings import RepairSettings


def _diagnostics(result) -> list[tuple]:
    return sorted((os.path.realpath(d.path), d.line, d.col, d.code, d.message) for d in result.diagnostics)


def test_the_helper_process_fills_the_cache_the_program_reads(toy, monkeypatch):
    pkg, folder, cache = toy
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    settings = RepairSettings(packages=(pkg,), isolated=True, cache_dir=str(cache))
    assert repair.check_in_helper_process(str(folder), settings, cache)
    config, use_cache = repair.package_config(settings, cache)
    assert use_cache
    warm = static.check_paths([str(folder)], config, jobs=1, use_cache=True, need_project=True)
    assert warm.analyzed == 0 and warm.cached == 3  # every file from the helper's cache
    cold = static.check_paths([str(folder)], config, jobs=1, use_cache=False, need_project=True)
    assert cold.analyzed == 3 and _diagnostics(warm) == _diagnostics(cold) and _diagnostics(cold)


def test_on_one_core_no_helper_process_runs(toy, monkeypatch):
    pkg, folder, cache = toy
    monkeypatch.setattr(os, "cpu_count", lambda: 1)
    settings = RepairSettings(packages=(pkg,), isolated=True, cache_dir=str(cache))
    assert not repair.check_in_helper_process(str(folder), settings, cache)
    assert not (cache / "static").exists()


def test_a_helper_process_that_fails_leaves_the_check_to_the_program(toy, monkeypatch):
    pkg, folder, cache = toy
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(sys, "executable", "/bin/false")
    hook = mi.repair_imports([pkg], cache_dir=str(cache), isolated=True)
    importlib.import_module(f"{pkg}.model")
    by_module = {e.module: e for e in hook.loaded.values()}
    assert by_module[f"{pkg}.model"].status == REPAIRED and not hook.errors
    assert [(a.code, a.line) for a in by_module[f"{pkg}.helpers"].applied] == [("MND102", 7)]
