"""The check cache is data: a repository that commits a crafted ``.mend_cache`` runs no code on whoever runs
``mend check`` (or the pre-commit hook) on a clone, and a cache damaged in any way is treated as empty."""

from __future__ import annotations

import os
import pickle
import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mend import __version__
from mend.analyzers.static import datacodec

BAD = textwrap.dedent("""
    import torch

    @torch.compile
    def f(x):
        print("x", x.shape)
        if x.sum() > 0:
            return x * 2
        return x
    """)


def mend(args: list[str], cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    exe = Path(sys.executable).with_name("mend")
    return subprocess.run([str(exe), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


class Exploit:
    """Unpickling it creates ``path``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


@pytest.fixture()
def repo(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.mend]\n")
    (tmp_path / "model.py").write_text(BAD)
    return tmp_path


def reference(repo: Path) -> subprocess.CompletedProcess:
    out = mend(["check", "--no-cache", "."], repo)
    assert out.returncode == 1 and "MND101" in out.stdout
    return out


def test_a_committed_pickle_is_never_loaded(repo: Path) -> None:
    ref = reference(repo)
    sentinel = repo / "pwned"
    check = repo / ".mend_cache" / "check"
    check.mkdir(parents=True)
    for name in (f"v{__version__}.pickle", f"runs-v{__version__}.pickle", f"v{__version__}.json"):
        (check / name).write_bytes(pickle.dumps({"x": Exploit(sentinel)}))
    for args in (["check", "."], ["check", "-j", "2", "."], ["check", "--statistics", "."]):
        out = mend(args, repo)
        assert not sentinel.exists(), args
        assert out.returncode == 1
    assert mend(["check", "."], repo).stdout == ref.stdout


def test_the_cache_names_only_mend_types(repo: Path) -> None:
    """A JSON cache naming another class (or a field the class does not have) is no cache."""
    ref = reference(repo)
    mend(["check", "."], repo)  # writes a real cache
    path = repo / ".mend_cache" / "check" / f"v{__version__}.json"
    text = path.read_text()
    assert '"@":"FileSummary"' in text
    for forged in (text.replace('"@":"FileSummary"', '"@":"Popen"'),
                   text.replace('"is_package":', '"__class__":'),
                   '{"@":"Diagnostic","f":{"code":"MND101"}}'):
        path.write_text(forged)
        out = mend(["check", "."], repo)
        assert (out.returncode, out.stdout) == (1, ref.stdout)
    with pytest.raises(datacodec.DataError):
        datacodec.loads('{"@":"Popen","f":{"args":"id"}}')


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_in_place_of_the_cache_does_not_hang(repo: Path) -> None:
    ref = reference(repo)
    check = repo / ".mend_cache" / "check"
    check.mkdir(parents=True)
    for name in (f"v{__version__}.json", f"runs-v{__version__}.json"):
        os.mkfifo(check / name)
    out = mend(["check", "."], repo, timeout=60)
    assert (out.returncode, out.stdout) == (1, ref.stdout)


def test_damaged_caches_are_empty_caches(repo: Path) -> None:
    """Random bytes, truncations and wrong types in both cache files, 40 times over, with -j 2: the same
    findings and exit code every run, and the run goes on writing a good cache."""
    ref = reference(repo)
    mend(["check", "."], repo)
    files = sorted((repo / ".mend_cache" / "check").glob("*.json"))
    good = {f: f.read_bytes() for f in files}
    rng = random.Random(7)
    for i in range(40):
        for f, data in good.items():
            kind = i % 4
            if kind == 0:
                f.write_bytes(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))))
            elif kind == 1:
                f.write_bytes(data[: rng.randrange(len(data))])
            elif kind == 2:
                f.write_text(rng.choice(['[]', 'null', '{"a": 1}', '{"@t": 5}', '{"@d": [[1]]}', '"x"',
                                         '{"@m": {"k": {"@": "FileSummary", "f": {"path": 1}}}}']))
            else:
                f.write_bytes(data.replace(b'"line":', b'"line":"x",', 1))
        out = mend(["check", "-j", "2", "."], repo)
        assert (out.returncode, out.stdout, out.stderr) == (1, ref.stdout, ref.stderr), i


values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.tuples(inner, inner)
    | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    | st.dictionaries(st.integers(), inner, max_size=3)
    | st.frozensets(st.integers(), max_size=3),
    max_leaves=20)


@settings(max_examples=200, deadline=None)
@given(values)
def test_the_codec_round_trips_plain_data(value) -> None:
    assert datacodec.loads(datacodec.dumps(value)) == value


@settings(max_examples=300, deadline=None)
@given(st.recursive(st.none() | st.integers() | st.text(max_size=6),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3),
                    max_leaves=15))
def test_any_json_decodes_or_raises_data_error(value) -> None:
    """Whatever JSON a cache holds, decoding returns plain values or raises DataError: never another error."""
    import json

    try:
        datacodec.loads(json.dumps(value))
    except datacodec.DataError:
        pass


def test_deep_nesting_is_a_data_error() -> None:
    with pytest.raises(datacodec.DataError):
        datacodec.loads("[" * 100000 + "]" * 100000)
