"""The file layer of ``mend fix``: read a source file as Python does, write it back without surprises.

Reading uses the static analyzer's decoder (:func:`mend.analyzers.static.source.decode`), so ``mend
check`` and ``mend fix`` see the same text: a BOM or a PEP 263 coding line is honoured, and the new text
is written back in the same encoding, BOM kept.

Writing (:func:`write`) follows these rules:

* a file whose lines all end in CRLF keeps CRLF line ends;
* a symbolic link is written through: its target (the real file) is rewritten and the link stays a link;
* a file the user may not write in place (read-only, immutable, owned by someone else without write
  permission) is never replaced, and neither is a file in a folder the user may not write: the file is
  reported and left as it is;
* a file that is not a regular file (a FIFO, a device) is never opened for reading (it could block), and
  one over :data:`~mend.safeio.MAX_SOURCE_BYTES` is not read;
* a file whose bytes changed on disk since they were read (:attr:`SourceFile.digest`, compared again
  just before the write) is left as it is; :func:`locked` keeps other ``mend fix`` runs out of a folder
  from the read to the write;
* otherwise the new text goes to a temporary file in the same folder, with the old file's permission
  bits, owner and group, and replaces it with ``os.replace``: an interrupt at any point leaves the old
  or the new file. When the replacement could not keep what the old file had (its owner or group, for a
  user who may write the file but does not own it; a file with several hard links, which a new file
  would split), the text is written into the existing file instead: owner, links and permissions stay,
  and SIGTERM and SIGINT wait until the write is done, but a SIGKILL mid-write can leave it partial;
* SIGTERM and SIGINT that arrive during a write are acted on once it is done, as a KeyboardInterrupt;
  the temporary file a SIGKILL leaves behind (``.NAME.*.mend-tmp``) is removed by the next write of
  that file.

:func:`create` writes a new file (the helper module of a repaired tree) the same way, never over one that
exists. :func:`identity` names the real file behind a path (device and inode), so that a file reached through
several links or hard links is fixed once.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import stat
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mend.analyzers.static.fixability import digest  # the one name of a file's bytes, check's and fix's
from mend.analyzers.static.source import SourceText, UnreadableSource, decode
from mend.safeio import MAX_SOURCE_BYTES, NotRegular, folder_lock, read_file, remove_stale

TEMP_SUFFIX = ".mend-tmp"
STALE_SECONDS = 0.0  # under the folder lock (:func:`locked`) no other run is writing: every such file is stale


class FileProblem(Exception):
    """A file that cannot be read or written; the message says why (``cannot read: ...``)."""


@dataclass(frozen=True)
class SourceFile:
    """A file as read: the path given, the real file behind it, its text and encoding, its state."""

    path: Path
    real: Path
    source: SourceText
    state: os.stat_result
    digest: str = ""  # sha256 of the bytes read

    @property
    def text(self) -> str:
        return self.source.text


def identity(path: Path) -> tuple[int, int] | None:
    """(device, inode) of the real file behind ``path`` (links followed), or None if it cannot be seen."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def read(path: Path) -> SourceFile:
    """Read and decode ``path`` (links followed). Raises :class:`FileProblem` (``cannot read: ...``)."""
    real = Path(os.path.realpath(path))
    try:
        data, state = read_file(real, MAX_SOURCE_BYTES)
    except OSError as exc:
        raise FileProblem(f"cannot read: {exc.strerror or exc}") from None
    try:
        source = decode(data)
    except UnreadableSource as exc:
        raise FileProblem(f"cannot read: {exc}") from None
    return SourceFile(path, real, source, state, digest(data))


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the folder of the real file behind ``path`` against other ``mend fix`` runs (read to write).
    Raises :class:`FileProblem` when another run holds it for too long."""
    try:
        with folder_lock(Path(os.path.realpath(path)).parent):
            yield
    except OSError as exc:
        if isinstance(exc, FileProblem):
            raise
        raise FileProblem(f"skipped: {exc.strerror or exc}; left unchanged") from None


def write(file: SourceFile, text: str) -> None:
    """Write ``text`` to ``file`` by the rules in the module docstring. Raises :class:`FileProblem`."""
    try:
        data = file.source.encode(same_newlines(file.text, text))
    except UnreadableSource as exc:
        raise FileProblem(f"cannot write: {exc}") from None
    real = file.real
    problem = _unwritable(file)
    if problem is not None:
        raise FileProblem(f"cannot write: {problem}; left unchanged")
    with deferred_signals():
        try:
            replaced = file.state.st_nlink == 1 and _replace(real, data, file.state)
        except OSError as exc:
            raise FileProblem(f"cannot write: {exc.strerror or exc}; left unchanged") from None
        if not replaced:
            try:
                _overwrite(real, data)
            except OSError as exc:
                raise FileProblem(f"writing in place failed: {exc.strerror or exc}; the file may be incomplete") \
                    from None


def create(path: Path, text: str, like: SourceFile) -> None:
    """Write the new file ``path`` (UTF-8, ``like``'s line ends and permission bits) atomically: a file that
    exists already, or appears meanwhile, is never replaced. Raises :class:`FileProblem`."""
    data = same_newlines(like.text, text).encode("utf-8")
    with deferred_signals():
        try:
            fd, tmp = tempfile.mkstemp(dir=str(path.parent), prefix=f".{path.name}.", suffix=TEMP_SUFFIX)
        except OSError as exc:
            raise FileProblem(f"cannot write: {exc.strerror or exc}") from None
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
                fh.flush()
                os.fchmod(fh.fileno(), stat.S_IMODE(like.state.st_mode))
                os.fsync(fh.fileno())
            os.link(tmp, path)  # fails where the file exists: never replaces one
        except FileExistsError:
            raise FileProblem("cannot write: the file appeared while mend was writing it; left unchanged") from None
        except OSError as exc:
            raise FileProblem(f"cannot write: {exc.strerror or exc}") from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def same_newlines(old: str, new: str) -> str:
    """``new`` with CRLF line ends where ``old`` has only CRLF (repairs may bring LF lines, such as a
    helper's docstring). Python reads both alike, so the program does not change."""
    crlf = old.count("\r\n")
    if crlf and crlf == old.count("\n"):
        return re.sub(r"(?<!\r)\n", "\r\n", new)
    return new


def _unwritable(file: SourceFile) -> str | None:
    """Why ``file`` must not be written now, or None."""
    try:
        now = os.stat(file.real)
    except OSError as exc:
        return f"the file is gone ({exc.strerror})"
    before = file.state
    if (now.st_dev, now.st_ino, now.st_size, now.st_mtime_ns) != \
            (before.st_dev, before.st_ino, before.st_size, before.st_mtime_ns) or not _same_bytes(file):
        return "the file changed on disk while mend was fixing it"
    if not _may(file.real, os.W_OK):
        return "permission denied (the file is read-only for this user, or immutable)"
    if not _may(file.real.parent, os.W_OK | os.X_OK):
        return f"permission denied (the folder {file.real.parent} is read-only for this user)"
    return None


def _same_bytes(file: SourceFile) -> bool:
    """The file still holds the bytes it was read with (an edit within one mtime tick keeps the stat)."""
    if not file.digest:
        return True
    try:
        data, _ = read_file(file.real, MAX_SOURCE_BYTES)
    except (OSError, NotRegular):
        return False
    return digest(data) == file.digest


def _may(path: Path, mode: int) -> bool:
    effective = os.access in os.supports_effective_ids
    return os.access(path, mode, effective_ids=effective)


def _replace(real: Path, data: bytes, old: os.stat_result) -> bool:
    """Atomically replace ``real`` by ``data`` with the old file's mode, owner and group.

    Returns False (and leaves everything as it was) when the new file cannot get the old owner or group."""
    remove_stale(real.parent, f".{real.name}.", TEMP_SUFFIX, STALE_SECONDS)
    fd, tmp = tempfile.mkstemp(dir=str(real.parent), prefix=f".{real.name}.", suffix=TEMP_SUFFIX)
    try:
        with os.fdopen(fd, "wb") as fh:
            if not _same_owner(fh.fileno(), old):
                os.unlink(tmp)
                return False
            fh.write(data)
            fh.flush()
            os.fchmod(fh.fileno(), stat.S_IMODE(old.st_mode))
            os.fsync(fh.fileno())
        os.replace(tmp, real)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return True


def _same_owner(fd: int, old: os.stat_result) -> bool:
    st = os.fstat(fd)
    if (st.st_uid, st.st_gid) == (old.st_uid, old.st_gid):
        return True
    try:
        os.fchown(fd, old.st_uid, old.st_gid)
    except OSError:
        return False
    return True


def _overwrite(real: Path, data: bytes) -> None:
    """Write ``data`` into the existing file (same inode: owner, links, permissions and ACLs stay)."""
    with open(real, "r+b") as fh:
        fh.write(data)
        fh.truncate()
        fh.flush()
        os.fsync(fh.fileno())


@contextlib.contextmanager
def deferred_signals() -> Iterator[None]:
    """Hold SIGTERM and SIGINT until the block is done, then raise KeyboardInterrupt if one came."""
    pending: list[int] = []
    previous: dict[int, Any] = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            previous[sig] = signal.signal(sig, lambda signum, frame: pending.append(signum))
        except ValueError:  # not the main thread: signals are not ours to defer
            break
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if pending:
        raise KeyboardInterrupt(f"signal {pending[0]}")


__all__ = ["FileProblem", "SourceFile", "create", "deferred_signals", "digest", "identity", "locked", "read", "write"]
