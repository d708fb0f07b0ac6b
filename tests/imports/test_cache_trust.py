"""The repair cache runs nothing it cannot verify: a tampered, replaced or planted entry is a miss (the
module is repaired again), a FIFO is never opened, a key others can read is refused, and a team can
share a cache on purpose with a shared key."""

from __future__ import annotations

import json
import marshal
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mend.imports import trust
from tests.imports.conftest import write_package

SCRIPT = textwrap.dedent("""
    import sys, mend
    hook = mend.repair_imports([{pkg!r}], cache_dir={cache!r}, isolated=True)
    import {pkg}.model as m
    import torch
    x = torch.ones(2, 4)
    b = m.Block()
    print("repaired" if "is_compiling" in __import__("inspect").getsource(m.Block.forward) else "original")
    print("ok", bool(torch.equal(b(x), b.lin(x) * 2)))
    print("hits", sum(1 for e in hook.loaded.values() if e.status == "repaired"))
    print("errors", hook.errors)
""")


@pytest.fixture()
def setup(tmp_path: Path) -> dict:
    pkg = f"mend_trust_{abs(hash(str(tmp_path))) % 10**8}"
    write_package(tmp_path / "pkgs", pkg)
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "pkgs"), "XDG_CONFIG_HOME": str(tmp_path / "config")}
    env.pop("MEND_REPAIR", None)
    env.pop(trust.KEY_ENV_VAR, None)
    return {"pkg": pkg, "cache": tmp_path / "cache", "env": env, "root": tmp_path}


def run(s: dict, **env) -> str:
    script = SCRIPT.format(pkg=s["pkg"], cache=str(s["cache"]))
    done = subprocess.run([sys.executable, "-c", script], cwd=s["root"], capture_output=True, text=True,
                          env={**s["env"], **env}, timeout=300)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def code_files(s: dict, module: str) -> tuple[Path, Path]:
    for meta in s["cache"].glob("entries/*/*.json"):
        if json.loads(meta.read_text())["module"] == f"{s['pkg']}.{module}":
            key = meta.stem
            return meta, next(meta.parent.glob(f"{key}.*.code"))
    raise AssertionError(f"no entry for {module}")


def test_a_replaced_compiled_module_is_never_executed(setup) -> None:
    s = setup
    assert "repaired" in run(s)
    _, code = code_files(s, "model")
    sentinel = s["root"] / "pwned"
    evil = compile(f"open({str(sentinel)!r}, 'w').close()\nclass Block: pass\n", "model.py", "exec")
    code.write_bytes(marshal.dumps(evil))  # no signature
    out = run(s)
    assert not sentinel.exists() and "ok True" in out and "repaired" in out
    # a validly signed code file of another module, under this module's name
    _, helper_code = code_files(s, "helpers")
    code.write_bytes(helper_code.read_bytes())
    out = run(s)
    assert "ok True" in out and "repaired" in out


def test_a_tampered_entry_is_repaired_again(setup) -> None:
    s = setup
    run(s)
    meta, _ = code_files(s, "model")
    raw = json.loads(meta.read_text())
    raw["text"] = raw["text"].replace("return scale(h)", "return scale(h) * 0")
    meta.write_text(json.dumps(raw))  # the old signature no longer matches
    assert "ok True" in run(s)
    raw["mac"] = trust.sign(b"not the key at all, not the key", json.dumps(raw).encode())
    meta.write_text(json.dumps(raw))
    assert "ok True" in run(s)


@pytest.mark.parametrize("planted", ["null", "[]", "{}", '{"key": 1}', "fifo"])
def test_planted_entries_are_misses_and_list_survives(setup, planted) -> None:
    s = setup
    run(s)
    meta, code = code_files(s, "model")
    for path in (meta, code):
        path.unlink()
        if planted == "fifo":
            os.mkfifo(path)
        else:
            path.write_text(planted)
    out = run(s)  # would hang forever on a FIFO
    assert "ok True" in out and "repaired" in out
    exe = Path(sys.executable).with_name("mend")
    listed = subprocess.run([str(exe), "repair-cache", "list", "--cache-dir", str(s["cache"])], capture_output=True,
                            text=True, env=s["env"], timeout=120)
    assert listed.returncode == 0 and "Traceback" not in listed.stderr


def test_a_key_others_can_read_is_refused(setup) -> None:
    s = setup
    run(s)
    path = s["root"] / "config" / "mend" / "repair-cache.key"
    assert path.exists() and stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o644)
    out = run(s)
    assert "the repair cache is not used" in out and "readable by others" in out
    assert "ok True" in out and "repaired" in out  # still repaired, in memory


def test_a_team_shares_a_cache_with_a_shared_key(setup, tmp_path) -> None:
    s = setup
    team_key = tmp_path / "team.key"
    team_key.write_text("a" * 64 + "\n")
    run(s, MEND_REPAIR_CACHE_KEY=str(team_key))
    meta, code = code_files(s, "model")
    assert stat.S_IMODE(meta.stat().st_mode) == 0o640 and stat.S_IMODE(code.stat().st_mode) == 0o640
    before = meta.stat().st_mtime_ns
    # another member (another config home, the same team key) hits: nothing is written again
    out = run(s, MEND_REPAIR_CACHE_KEY=str(team_key), XDG_CONFIG_HOME=str(tmp_path / "other"))
    assert "ok True" in out and meta.stat().st_mtime_ns == before
    # someone without the key does not trust the entries: repaired again for them
    run(s, XDG_CONFIG_HOME=str(tmp_path / "stranger"))
    assert meta.stat().st_mtime_ns != before
