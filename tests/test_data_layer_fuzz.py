"""Fuzz of mend's file and data layers (issue 36): random bytes, truncations and JSON of the wrong shape
fed to every reader of a cache, data file or pipe frame. Each must answer with its own error or a miss:
never another exception, never code run. Fast (150 examples each); ``FUZZ_EXAMPLES=5000`` in the
environment is the long profile."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mend.analyzers.runtime import data as rd
from mend.analyzers.static import datacodec
from mend.analyzers.static.cache import ResultCache
from mend.imports.cache import Entry, RepairCache

FAST = settings(max_examples=int(os.environ.get("FUZZ_EXAMPLES") or 150), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)
# JSON objects with the data file's own field names, so that the shapes get past the first checks
run_like = st.fixed_dictionaries({"version": st.just(1)}, optional={
    name: json_values for name in ("root", "tool", "runs", "breaks", "recompiles", "regions", "tests", "repaired")})


def _mutations(data: bytes) -> st.SearchStrategy[bytes]:
    """Truncations, flipped bytes and random bytes of ``data``."""
    n = len(data)
    return st.one_of(
        st.integers(0, max(n - 1, 0)).map(lambda k: data[:k]),
        st.tuples(st.integers(0, max(n - 1, 0)), st.integers(0, 255)).map(
            lambda t: data[:t[0]] + bytes([t[1]]) + data[t[0] + 1:]),
        st.binary(max_size=200))


GOOD_RUN = json.dumps(rd.RunData(root="/p", runs=[rd.RunInfo(argv=["a.py"])], breaks=[
    rd.BreakSite("a.py", 3, "f", "t", "GB0170", "m")]).to_dict()).encode()


@FAST
@given(raw=run_like)
def test_a_run_data_dict_of_any_shape_is_data_or_a_data_file_error(raw):
    try:
        data = rd.RunData.from_dict(raw)
    except rd.DataFileError:
        return
    rd.RunData.from_dict(json.loads(json.dumps(data.to_dict())))  # what it read, it can write and read back


@FAST
@given(blob=_mutations(GOOD_RUN))
def test_a_damaged_data_file_is_data_or_a_data_file_error(tmp_path_factory, blob):
    path = tmp_path_factory.mktemp("d") / "run.json"
    path.write_bytes(blob)
    try:
        rd.load(path)
    except rd.DataFileError:
        pass


@FAST
@given(blob=st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode()))
def test_a_damaged_check_cache_is_an_empty_cache(tmp_path_factory, blob):
    folder = tmp_path_factory.mktemp("c")
    cache = ResultCache(folder)
    cache.file.parent.mkdir(parents=True)
    cache.file.write_bytes(blob)
    cache.load()
    assert isinstance(cache.entries, dict)
    try:
        datacodec.loads(blob)
    except datacodec.DataError:
        pass


@pytest.fixture
def repair_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    monkeypatch.delenv("MEND_REPAIR_CACHE_KEY", raising=False)
    cache = RepairCache(tmp_path / "cache")
    entry = Entry(key="ab" + "1" * 62, module="m", path="/m.py", source_sha256="0" * 64, status="repaired",
                  text="x = 1\n", line_map=[1])
    cache.put(entry)
    cache.put_code(entry.key, compile(entry.text, "/m.py", "exec"))
    return cache, entry


@FAST
@given(data=st.data())
def test_a_damaged_repair_cache_entry_is_a_miss(repair_cache, data):
    cache, entry = repair_cache
    meta, code = cache._paths(entry.key)
    good_meta, good_code = meta.read_bytes(), code.read_bytes()
    try:
        meta.write_bytes(data.draw(_mutations(good_meta)))
        got = cache.get(entry.key)
        assert got is None or got == entry
        code.write_bytes(data.draw(_mutations(good_code)))
        got_code = cache.get_code(entry.key)
        assert got_code is None or got_code.co_filename == "/m.py"
        list(cache.iter_entries())
    finally:
        meta.write_bytes(good_meta)
        code.write_bytes(good_code)


@FAST
@given(raw=json_values)
def test_an_entry_of_any_json_shape_is_an_entry_or_a_value_error(raw):
    try:
        Entry.from_json(json.dumps(raw))
    except ValueError:
        pass


@FAST
@given(blob=st.binary(max_size=300) | json_values.map(lambda v: json.dumps(v).encode()))
def test_a_compile_worker_frame_is_data_or_a_value_error(blob):
    pytest.importorskip("torch")
    from mend.compiler.codegen.triton.worker import decode_frame

    try:
        decode_frame(blob)
    except ValueError:
        pass


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_non_regular_files_in_place_of_every_file_never_block(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "config"))
    fifo_run = tmp_path / "run.json"
    os.mkfifo(fifo_run)
    with pytest.raises(rd.DataFileError, match="not a data file"):
        rd.load(fifo_run)
    check = ResultCache(tmp_path / "check-cache")
    check.file.parent.mkdir(parents=True)
    os.mkfifo(check.file)
    check.load()
    assert check.entries == {}
    cache = RepairCache(tmp_path / "repair")
    meta, code = cache._paths("cd" + "2" * 62)
    meta.parent.mkdir(parents=True)
    os.mkfifo(meta)
    os.mkfifo(code)
    assert cache.get("cd" + "2" * 62) is None and cache.get_code("cd" + "2" * 62) is None


def test_a_non_ascii_signature_is_a_miss_not_a_crash(repair_cache) -> None:
    cache, entry = repair_cache
    meta, code = cache._paths(entry.key)
    raw = json.loads(meta.read_text())
    meta.write_text(json.dumps({**raw, "mac": "\u00e9" * 64}))
    assert cache.get(entry.key) is None
    code.write_bytes(b"\x80" * 64 + b"\n" + code.read_bytes()[65:])
    assert cache.get_code(entry.key) is None
