"""The file layer mend's parts share: reading only regular files, and serializing writers of a folder.

Standard library only (the import hook's warm path reads through here). ``docs/security.md`` is the user's
view.

* :func:`read_file` reads a *regular* file only: it opens without blocking (a FIFO named ``x.py`` or
  planted as a cache entry never hangs a run), checks what it opened (``fstat``, not the path: no race
  with a swap) and bounds the size; it says why not (:class:`NotRegular`). :func:`read_regular` is the
  same as bytes or None, for caches, where any failure is a miss.
* :func:`folder_lock` holds an exclusive advisory lock on a folder (``flock`` of the folder itself: no
  lock file is left behind) so that concurrent writers of a folder (two ``mend fix`` runs, four
  ``mend run --append``) take turns; :func:`remove_stale` clears the temporary files a killed writer left.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import time
from collections.abc import Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no advisory locks, writes are still atomic
    fcntl = None  # type: ignore[assignment]

MAX_FILE_BYTES = 64 << 20  # a cache entry larger than this is not one mend wrote
MAX_SOURCE_BYTES = 16 << 20  # a Python file larger than this is skipped by check and fix, with the reason


class NotRegular(OSError):
    """A path that is not a regular file (a FIFO, a device, a socket, a folder), or one too large."""


def kind_of(mode: int) -> str:
    """``a FIFO (named pipe)``, ``a folder``, ... for an ``st_mode``."""
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def read_file(path: str | os.PathLike[str], limit: int = MAX_FILE_BYTES, *,
              follow: bool = True) -> tuple[bytes, os.stat_result]:
    """The bytes of the regular file ``path`` and the state of what was read (not of the path).

    Never blocks: opened with ``O_NONBLOCK`` and checked with ``fstat`` before reading. Raises
    :class:`NotRegular` for anything but a regular file of at most ``limit`` bytes, ``OSError`` when it
    cannot be opened (with ``follow=False``, a link is not followed: ``ELOOP``)."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
    if not follow:
        flags |= getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(path, flags)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegular(errno.EINVAL, f"not a regular file ({kind_of(st.st_mode)})")
        if st.st_size > limit:
            raise NotRegular(errno.EFBIG, f"larger than {limit >> 20} MB ({st.st_size} bytes)")
        chunks, size = [], 0
        while True:
            chunk = os.read(fd, 1 << 20)
            if not chunk:
                return b"".join(chunks), st
            size += len(chunk)
            if size > limit:  # grew while being read
                raise NotRegular(errno.EFBIG, f"larger than {limit >> 20} MB")
            chunks.append(chunk)
    finally:
        os.close(fd)


def read_regular(path: str | os.PathLike[str], limit: int = MAX_FILE_BYTES, *, follow: bool = False) -> bytes | None:
    """The bytes of ``path`` if it is a regular file of at most ``limit`` bytes (by default no link
    followed), never blocking on a FIFO or device; None otherwise (for a cache: a miss)."""
    try:
        return read_file(path, limit, follow=follow)[0]
    except OSError:
        return None


def remove_stale(folder: str | os.PathLike[str], prefix: str, suffix: str, older_than: float = 0.0) -> int:
    """Remove this user's regular files ``prefix*suffix`` in ``folder`` last modified more than
    ``older_than`` seconds ago (temporary files of a writer that was killed); returns how many."""
    removed = 0
    now = time.time()
    me = os.geteuid() if hasattr(os, "geteuid") else None
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    for name in names:
        if not (name.startswith(prefix) and name.endswith(suffix)) or len(name) <= len(prefix) + len(suffix):
            continue
        path = os.path.join(folder, name)
        try:
            st = os.lstat(path)
            if stat.S_ISREG(st.st_mode) and (me is None or st.st_uid == me) and now - st.st_mtime >= older_than:
                os.unlink(path)
                removed += 1
        except OSError:
            continue
    return removed


class LockTimeout(OSError):
    """Another process held the lock for longer than we would wait."""


@contextlib.contextmanager
def folder_lock(folder: str | os.PathLike[str], timeout: float = 120.0) -> Iterator[None]:
    """Hold an exclusive advisory lock on ``folder`` (``flock`` on the folder itself) for the block.

    Waits up to ``timeout`` seconds, then raises :class:`LockTimeout`. Where locks are not available
    (Windows, a file system without ``flock``) the block runs unlocked."""
    fd = None
    if fcntl is not None:
        try:
            fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            fd = None
    try:
        if fd is not None:
            deadline = time.monotonic() + timeout
            delay = 0.005
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise LockTimeout(errno.EAGAIN, f"{folder} is locked by another process") from None
                    time.sleep(delay)
                    delay = min(delay * 2, 0.1)
                except OSError:  # no flock on this file system: unlocked
                    break
        yield
    finally:
        if fd is not None:
            os.close(fd)  # closing releases the lock


__all__ = ["MAX_FILE_BYTES", "MAX_SOURCE_BYTES", "LockTimeout", "NotRegular", "folder_lock", "kind_of",
           "read_file", "read_regular", "remove_stale"]
