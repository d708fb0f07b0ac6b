"""The import hook in this process: repaired modules, what tracebacks/inspect/linecache show, the cache."""

from __future__ import annotations

import importlib
import inspect
import linecache
import os
import subprocess
import sys
import traceback
from pathlib import Path

import pytest

import mend.imports as mi
from mend.imports.cache import REPAIRED, UNCHANGED, RepairCache
from mend.imports.hook import RepairLoader


def _import(pkg: str, name: str):
    return importlib.import_module(f"{pkg}.{name}")


def test_modules_of_the_package_load_repaired(toy):
    pkg, folder, cache = toy
    import mend

    hook = mend.repair_imports([pkg], cache_dir=str(cache), isolated=True)
    assert hook is mi.active()
    model = _import(pkg, "model")
    helpers = sys.modules[f"{pkg}.helpers"]
    assert isinstance(model.__loader__, RepairLoader)
    assert model.__file__ == str(folder / "model.py")
    by_module = {e.module: e for e in hook.loaded.values()}
    assert by_module[f"{pkg}.model"].status == REPAIRED
    assert [(a.code, a.line) for a in by_module[f"{pkg}.model"].applied] == [("MND102", 18)]
    # helpers.scale is traced because model's forward calls it: the package is analysed as one tree
    assert [(a.code, a.line) for a in by_module[f"{pkg}.helpers"].applied] == [("MND102", 7)]
    assert by_module[pkg].status == UNCHANGED
    assert "is_compiling()" in inspect.getsource(model.Block.forward)
    assert "is_compiling()" in inspect.getsource(helpers.scale)
    # the program computes the same thing
    import torch

    torch.manual_seed(0)
    x = torch.randn(3, 4)
    block = model.Block()
    assert torch.equal(block(x), block.lin(x) * 2)
    # the original file and its __pycache__ hold no repaired code
    assert "is_compiling" not in (folder / "model.py").read_text()
    for pyc in (folder / "__pycache__").glob("model.*.pyc") if (folder / "__pycache__").exists() else []:
        assert b"is_compiling" not in pyc.read_bytes()


def test_tracebacks_getsource_and_linecache_show_the_repaired_line_under_the_original_name(toy):
    pkg, folder, cache = toy
    mi.repair_imports([pkg], cache_dir=str(cache), isolated=True)
    helpers = _import(pkg, "helpers")
    original = (folder / "helpers.py").read_text().splitlines()
    with pytest.raises(RuntimeError) as info:
        helpers.fail()
    frame = traceback.extract_tb(info.value.__traceback__)[-1]
    assert frame.filename == str(folder / "helpers.py")
    assert frame.line == 'raise RuntimeError("from helpers")'
    assert frame.lineno != original.index('    raise RuntimeError("from helpers")') + 1  # a repaired line number
    assert linecache.getline(frame.filename, frame.lineno).strip() == frame.line
    assert helpers.fail.__code__.co_filename == str(folder / "helpers.py")
    linecache.checkcache()  # keeps the repaired text (the original file is newer on disk than nothing)
    assert linecache.getline(frame.filename, frame.lineno).strip() == frame.line
    assert inspect.getsourcefile(helpers.fail) == str(folder / "helpers.py")
    assert "is_compiling" in inspect.getsource(helpers)
    assert helpers.__loader__.get_source(helpers.__name__) == inspect.getsource(helpers)


UNCAUGHT = """\
import sys, traceback
import mend
mend.repair_imports([sys.argv[1]], cache_dir=sys.argv[2], isolated=True)
helpers = __import__(sys.argv[1] + ".helpers").helpers
try:
    helpers.fail()
except RuntimeError:
    print(traceback.format_exc())
helpers.fail()  # uncaught: printed by sys.excepthook
"""


def test_an_uncaught_exception_shows_the_repaired_line_at_its_number(toy):
    """Before Python 3.13 the interpreter's own printer reads the line from the file on disk: the original's
    text at the repaired number (here a comment line) unless the hook prints it through linecache."""
    pkg, folder, cache = toy
    helpers = folder / "helpers.py"
    helpers.write_text(helpers.read_text() + "".join(f"# original line {n}\n" for n in range(14, 40)))
    script = folder.parent / "uncaught.py"
    script.write_text(UNCAUGHT)
    env = {**os.environ, "PYTHONPATH": str(folder.parent)}
    proc = subprocess.run([sys.executable, str(script), pkg, str(cache)], capture_output=True, text=True,
                          env=env, timeout=300)
    assert proc.returncode == 1, proc.stderr
    entry = f'File "{helpers}", line '
    for printed in (proc.stdout, proc.stderr):  # traceback.format_exc(), then the uncaught one
        lines = printed.splitlines()
        at = next(i for i, line in enumerate(lines) if entry in line and line.endswith(", in fail"))
        number = int(lines[at].split(entry)[1].split(",")[0])
        assert number > 13  # a repaired line number: the original's raise is line 12
        assert lines[at + 1].strip() == 'raise RuntimeError("from helpers")', printed
        assert "# original line" not in printed


def test_warm_import_reads_the_cache_and_a_changed_file_is_repaired_again(toy):
    pkg, folder, cache = toy
    hook = mi.repair_imports([pkg], cache_dir=str(cache), isolated=True)
    _import(pkg, "model")
    first = {e.module: e.key for e in hook.loaded.values()}
    entries = sorted(p.name for p in cache.glob("entries/*/*"))
    assert len([n for n in entries if n.endswith(".json")]) == 3
    assert any(n.endswith(".code") for n in entries)
    assert not list(cache.glob("entries/*/.*"))  # no temporary file left behind

    def reimport() -> dict[str, str]:
        for name in [m for m in sys.modules if m.startswith(pkg)]:
            del sys.modules[name]
        hook = mi.repair_imports([pkg], cache_dir=str(cache), isolated=True)
        _import(pkg, "model")
        return hook

    import mend.imports.repair as repair

    calls = []
    real = repair.PackageContext.repair
    try:
        repair.PackageContext.repair = lambda self, *a: calls.append(a[0]) or real(self, *a)
        hook = reimport()
        assert calls == []  # warm: every module from the cache
        assert {e.module: e.key for e in hook.loaded.values()} == first
        # a changed file is a new key (content hash); the others stay warm
        model_py = folder / "model.py"
        model_py.write_text(model_py.read_text().replace("too many rows", "too many rows!"))
        hook = reimport()
        # model.py's content is in its key, and the package's state in every module's key (a changed module
        # may change which functions of the others are traced)
        assert sorted(calls) == sorted([pkg, f"{pkg}.model", f"{pkg}.helpers"])
        assert {e.module: e.key for e in hook.loaded.values()}[f"{pkg}.model"] != first[f"{pkg}.model"]
        # other fix options are other keys
        calls.clear()
        for name in [m for m in sys.modules if m.startswith(pkg)]:
            del sys.modules[name]
        hook = mi.repair_imports([pkg], cache_dir=str(cache), isolated=True, unsafe=True)
        _import(pkg, "model")
        assert sorted(calls) == sorted([pkg, f"{pkg}.model", f"{pkg}.helpers"])
    finally:
        repair.PackageContext.repair = real


def test_package_fingerprint_is_in_the_key(toy):
    """A new module elsewhere in the package changes who calls whom: every module is a new key."""
    pkg, folder, cache = toy
    hook = mi.repair_imports([pkg], cache_dir=str(cache), isolated=True)
    _import(pkg, "helpers")
    key = next(e.key for e in hook.loaded.values() if e.module.endswith("helpers"))
    for name in [m for m in sys.modules if m.startswith(pkg)]:
        del sys.modules[name]
    (folder / "extra.py").write_text("X = 1\n")
    hook = mi.repair_imports([pkg], cache_dir=str(cache), isolated=True)
    _import(pkg, "helpers")
    assert next(e.key for e in hook.loaded.values() if e.module.endswith("helpers")) != key


def test_a_module_mend_cannot_repair_loads_unchanged(toy, monkeypatch):
    pkg, folder, cache = toy
    import libcst

    def refuse(*args, **kwargs):
        raise libcst.ParserSyntaxError("cannot parse this", lines=[""], raw_line=1, raw_column=0)

    monkeypatch.setattr("mend.rewriter.engine.cst.parse_module", refuse)
    hook = mi.repair_imports([pkg], cache_dir=str(cache), isolated=True)
    model = _import(pkg, "model")
    entry = next(e for e in hook.loaded.values() if e.module == f"{pkg}.model")
    assert entry.status == "failed" and entry.error
    assert any(m == f"{pkg}.model" for m, _ in hook.errors)
    assert "is_compiling" not in inspect.getsource(model.Block.forward)
    import torch

    assert model.Block()(torch.ones(2, 4)).shape == (2, 4)


def test_a_file_that_does_not_parse_raises_as_without_the_hook(toy):
    pkg, folder, cache = toy
    (folder / "broken.py").write_text("def f(:\n    pass\n")
    hook = mi.repair_imports([pkg], cache_dir=str(cache), isolated=True)
    with pytest.raises(SyntaxError) as info:
        _import(pkg, "broken")
    assert info.value.filename == str(folder / "broken.py")
    assert all(e.status != REPAIRED for e in hook.loaded.values() if e.module.endswith("broken"))


def test_a_fix_error_never_breaks_the_import(toy, monkeypatch):
    pkg, folder, cache = toy

    def explode(*args, **kwargs):
        raise MemoryError("no memory for the repair")

    monkeypatch.setattr("mend.rewriter.window.fix_windowed", explode)
    hook = mi.repair_imports([pkg], cache_dir=str(cache), isolated=True)
    model = _import(pkg, "model")
    assert model.Block is not None
    assert {e.status for e in hook.loaded.values() if e.module != pkg} == {"failed"}
    assert "MemoryError" in dict(hook.errors)[f"{pkg}.model"]


def test_an_unwritable_cache_still_repairs(toy):
    pkg, folder, cache = toy
    cache.write_text("a file where the cache folder should be")
    hook = mi.repair_imports([pkg], cache_dir=str(cache), isolated=True)
    model = _import(pkg, "model")
    assert "is_compiling" in inspect.getsource(model.Block.forward)
    assert any("cannot write the repair cache" in why for _, why in hook.errors)


def test_other_packages_and_already_imported_modules_are_left_alone(toy):
    pkg, folder, cache = toy
    _import(pkg, "helpers")
    with pytest.warns(mi.RepairWarning, match="already imported"):
        hook = mi.repair_imports([pkg], cache_dir=str(cache), isolated=True)
    import json  # noqa: F401  (a module outside the package)

    assert not isinstance(sys.modules[f"{pkg}.helpers"].__loader__, RepairLoader)
    assert all(e.module.startswith(pkg) for e in hook.loaded.values())


def test_repair_cache_list_and_clear(toy):
    pkg, folder, cache = toy
    mi.repair_imports([pkg], cache_dir=str(cache), isolated=True)
    _import(pkg, "model")
    rc = RepairCache(cache)
    assert sorted(e.module for e in rc.iter_entries()) == sorted([pkg, f"{pkg}.model", f"{pkg}.helpers"])
    assert rc.clear() == 3
    assert list(rc.iter_entries()) == [] and not any(p.name.startswith(".trash") for p in cache.iterdir())


def test_the_env_var_carries_the_settings(toy):
    pkg, folder, cache = toy
    mi.repair_imports([pkg], cache_dir=str(cache), unsafe=True, isolated=True)
    settings = mi.RepairSettings.from_env(os.environ["MEND_REPAIR"])
    assert settings == mi.active().settings
    assert os.environ["PYTHONPATH"].split(os.pathsep)[0] == str(Path(mi.settings.STARTUP_DIR))
    assert mi.RepairSettings.from_env("a,b.c").packages == ("a", "b.c")
    with pytest.raises(mi.SettingsError):
        mi.RepairSettings.from_env("{not json")
    with pytest.raises(mi.SettingsError):
        mi.RepairSettings.from_env(" , ")


def test_warmed_cache_serves_the_import_without_repairing(toy, monkeypatch):
    """`mend repair-cache warm`'s path: every module repaired into the cache without executing any; the
    import then takes the entries and the compiled code as they are (a repair at import would fail here)."""
    from mend.imports.settings import RepairSettings
    from mend.imports.warm import package_modules, warm

    pkg, folder, cache = toy
    modules = {m: is_pkg for m, _, is_pkg in package_modules(pkg)}
    assert modules == {pkg: True, f"{pkg}.model": False, f"{pkg}.helpers": False}
    report = warm(RepairSettings(packages=(pkg,), isolated=True, cache_dir=str(cache)))
    assert dict(report.statuses) == {"repaired": 2, "unchanged": 1} and report.new == 3 and not report.errors
    assert not any(m.startswith(pkg) for m in sys.modules)  # nothing of the package was executed
    assert warm(RepairSettings(packages=(pkg,), isolated=True, cache_dir=str(cache))).new == 0

    def no_repair(*args, **kwargs):
        raise AssertionError("repaired at import although the cache was warm")

    monkeypatch.setattr("mend.imports.repair.PackageContext", no_repair)
    monkeypatch.setattr("mend.imports.hook.compile", no_repair, raising=False)  # the code is cached too
    hook = mi.repair_imports([pkg], cache_dir=str(cache), isolated=True)
    model = _import(pkg, "model")
    monkeypatch.undo()
    assert not hook.errors
    assert {e.module: e.status for e in hook.loaded.values()}[f"{pkg}.model"] == REPAIRED
    assert "is_compiling()" in inspect.getsource(model.Block.forward)
