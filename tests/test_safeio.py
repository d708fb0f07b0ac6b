"""mend.safeio: regular files only, never blocking; a folder lock that serializes processes."""

from __future__ import annotations

import multiprocessing
import os
import time
from pathlib import Path

import pytest

from mend import safeio


def test_a_regular_file_is_read_with_its_state(tmp_path: Path) -> None:
    f = tmp_path / "a.py"
    f.write_bytes(b"x = 1\n")
    data, st = safeio.read_file(f)
    assert data == b"x = 1\n" and st.st_size == 6
    assert safeio.read_regular(f) == b"x = 1\n"


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs")
def test_a_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "x.py"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    with pytest.raises(safeio.NotRegular, match="FIFO"):
        safeio.read_file(fifo)
    assert safeio.read_regular(fifo) is None
    assert time.monotonic() - t0 < 5


def test_folders_links_and_large_files_are_refused(tmp_path: Path) -> None:
    with pytest.raises(safeio.NotRegular, match="folder"):
        safeio.read_file(tmp_path)
    big = tmp_path / "big.py"
    big.write_bytes(b"#" * 2048)
    with pytest.raises(safeio.NotRegular, match="larger"):
        safeio.read_file(big, 1024)
    link = tmp_path / "link.py"
    link.symlink_to(big)
    assert safeio.read_regular(link) is None  # not followed by default
    assert safeio.read_regular(link, follow=True) == b"#" * 2048


def _hold(folder: str, log: str, tag: str) -> None:
    with safeio.folder_lock(folder):
        with open(log, "a") as fh:
            fh.write(f"{tag}+\n")
        time.sleep(0.2)
        with open(log, "a") as fh:
            fh.write(f"{tag}-\n")


def test_the_folder_lock_serializes_processes(tmp_path: Path) -> None:
    log = tmp_path / "log"
    procs = [multiprocessing.get_context("fork").Process(target=_hold, args=(str(tmp_path), str(log), str(i)))
             for i in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    lines = log.read_text().split()
    assert len(lines) == 6
    for i in range(0, 6, 2):  # every holder leaves before the next one enters
        assert lines[i].endswith("+") and lines[i + 1] == lines[i][:-1] + "-"


def test_remove_stale_removes_only_matching_files(tmp_path: Path) -> None:
    (tmp_path / ".a.py.x1.mend-tmp").write_text("")
    (tmp_path / "a.py").write_text("")
    assert safeio.remove_stale(tmp_path, ".a.py.", ".mend-tmp") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.py"]
