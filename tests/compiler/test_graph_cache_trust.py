"""The graph cache unpickles only entries signed with this user's key, whole, for their key (issue 36)."""

from __future__ import annotations

import os
import pickle

import pytest

pytest.importorskip("torch")

from mend.compiler.runtime import graph_cache  # noqa: E402
from mend.imports import trust  # noqa: E402

KEY = "ab" + "0" * 62


class _Sentinel:
    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (os.system, (f"touch {self.path}",))


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MEND_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("MEND_REPAIR_CACHE_KEY", raising=False)
    monkeypatch.delenv("MEND_DISABLE_CACHE", raising=False)
    return tmp_path / "cache"


def test_an_entry_round_trips(cache):
    graph_cache.store(KEY, {"graph": [1, 2, 3]})
    assert graph_cache.load(KEY) == {"graph": [1, 2, 3]}
    assert [p.name for p in graph_cache._path(KEY).parent.iterdir()] == [f"{KEY}.pkl"]


def test_a_planted_pickle_is_never_loaded(cache, tmp_path):
    sentinel = tmp_path / "pwned"
    path = graph_cache._path(KEY)
    path.parent.mkdir(parents=True)
    path.write_bytes(pickle.dumps(_Sentinel(str(sentinel))))
    assert graph_cache.load(KEY) is None
    assert not sentinel.exists()


def test_an_entry_signed_with_another_key_or_for_another_key_is_never_loaded(cache, tmp_path):
    sentinel = tmp_path / "pwned"
    body = pickle.dumps(_Sentinel(str(sentinel)))
    path = graph_cache._path(KEY)
    path.parent.mkdir(parents=True)
    path.write_bytes(trust.sign(b"x" * 32, b"mend graph", KEY.encode(), body).encode() + b"\n" + body)
    assert graph_cache.load(KEY) is None
    other = "cd" + "0" * 62  # a genuine entry of another key, copied over this one
    graph_cache.store(other, "honest")
    path.write_bytes(graph_cache._path(other).read_bytes())
    assert graph_cache.load(KEY) is None
    assert not sentinel.exists()


def test_a_damaged_entry_is_a_miss_and_a_fifo_does_not_hang(cache):
    graph_cache.store(KEY, "honest")
    path = graph_cache._path(KEY)
    path.write_bytes(path.read_bytes()[:-3])
    assert graph_cache.load(KEY) is None
    path.unlink()
    os.mkfifo(path)
    assert graph_cache.load(KEY) is None


def test_an_untrusted_key_turns_the_cache_off(cache, tmp_path):
    graph_cache.store(KEY, "honest")
    key_file, _ = trust.key_file()
    os.chmod(key_file, 0o644)  # readable by others: anyone could sign
    trust._KEYS.clear()
    try:
        assert graph_cache.load(KEY) is None
    finally:
        os.chmod(key_file, 0o600)
        trust._KEYS.clear()
