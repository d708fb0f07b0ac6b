"""Cache keys, atomic writes and concurrent writers."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from mend.imports.cache import Entry, RepairCache, atomic_write, entry_key
from tests.imports.conftest import write_package


def test_key_covers_content_path_and_every_fingerprint():
    base, digest = entry_key(b"x = 1\n", "/a/m.py", "mend", "opts", "config", "package", "")
    assert digest == entry_key(b"x = 1\n", "/b/m.py", "mend")[1]  # the content hash alone
    assert base == entry_key(b"x = 1\n", "/a/m.py", "mend", "opts", "config", "package", "")[0]
    others = [entry_key(b"x = 2\n", "/a/m.py", "mend", "opts", "config", "package", ""),
              entry_key(b"x = 1\n", "/b/m.py", "mend", "opts", "config", "package", ""),
              entry_key(b"x = 1\n", "/a/m.py", "mend2", "opts", "config", "package", ""),
              entry_key(b"x = 1\n", "/a/m.py", "mend", "unsafe", "config", "package", ""),
              entry_key(b"x = 1\n", "/a/m.py", "mend", "opts", "config2", "package", ""),
              entry_key(b"x = 1\n", "/a/m.py", "mend", "opts", "config", "package2", ""),
              entry_key(b"x = 1\n", "/a/m.py", "mend", "opts", "config", "package", "sites")]
    assert len({k for k, _ in others} | {base}) == len(others) + 1


def test_fix_fingerprint_follows_the_options():
    from mend.imports.settings import RepairSettings

    a = RepairSettings(packages=("p",), root="/r")
    assert a.fix_fingerprint() == RepairSettings(packages=("q",), root="/r", cache_dir="/c").fix_fingerprint()
    assert a.fix_fingerprint() != RepairSettings(packages=("p",), root="/r", unsafe=True).fix_fingerprint()
    assert a.fix_fingerprint() != RepairSettings(packages=("p",), root="/r", side_effects="drop").fix_fingerprint()
    assert a.fix_fingerprint() != RepairSettings(packages=("p",), root="/other").fix_fingerprint()


def test_config_fingerprint_follows_pyproject(tmp_path):
    from mend.imports import cache

    cache._memo.clear()
    before = cache.config_fingerprint(str(tmp_path), None, False)
    (tmp_path / "pyproject.toml").write_text('[tool.mend]\nside-effects = "drop"\n')
    cache._memo.clear()
    assert cache.config_fingerprint(str(tmp_path), None, False) != before
    assert cache.config_fingerprint(str(tmp_path), None, True) == cache.config_fingerprint("/", None, True)


def test_entry_round_trip_and_unreadable_entries_are_misses(tmp_path):
    rc = RepairCache(tmp_path)
    entry = Entry(key="ab" + "0" * 62, module="m", path="/m.py", source_sha256="s", status="repaired",
                  text="x = 1\n", line_map=[1])
    rc.put(entry)
    assert rc.get(entry.key) == entry
    meta = next(tmp_path.glob("entries/ab/*.json"))
    meta.write_text("{half")
    assert rc.get(entry.key) is None
    assert rc.get("cd" + "0" * 62) is None
    assert rc.get_code(entry.key) is None


def test_atomic_write_replaces_whole_files(tmp_path):
    target = tmp_path / "f"
    atomic_write(target, b"one")
    atomic_write(target, b"two")
    assert target.read_bytes() == b"two" and os.listdir(tmp_path) == ["f"]


WORKER = textwrap.dedent("""
    import json, sys, inspect
    import mend.imports as mi
    hook = mi.repair_imports([sys.argv[1]], cache_dir=sys.argv[2], isolated=True, propagate=False)
    sys.stdin.read()  # start together
    import importlib
    m = importlib.import_module(sys.argv[1] + ".helpers")
    print(json.dumps({"errors": hook.errors, "source": inspect.getsource(m.scale),
                      "keys": sorted(e.key for e in hook.loaded.values())}))
""")


def test_concurrent_processes_fill_one_cache(tmp_path):
    """Four processes repair the same package into one empty cache at once: all load the same repaired
    module, no error, and every entry in the cache is whole."""
    write_package(tmp_path / "pkgs", "concurrent_toy")
    cache = tmp_path / "cache"
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "pkgs"))
    env.pop("MEND_REPAIR", None)
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, "concurrent_toy", str(cache)], env=env, cwd=tmp_path,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(4)]
    outs = [p.communicate("go", timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, [err for _, err in outs]
    results = [json.loads(out) for out, _ in outs]
    assert all(r["errors"] == [] for r in results)
    assert len({r["source"] for r in results}) == 1 and "is_compiling" in results[0]["source"]
    assert len({tuple(r["keys"]) for r in results}) == 1
    rc = RepairCache(cache)
    assert sorted(e.key for e in rc.iter_entries()) == results[0]["keys"]
    assert not [p for p in (cache / "entries").rglob(".*") if p.is_file()]  # no temporary file left
