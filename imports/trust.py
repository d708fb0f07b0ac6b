"""What makes a repair-cache entry trusted: a key only its writers hold.

The repair cache holds code that runs in every process importing the repaired packages, in a folder
that may be shared (a CI cache, a team's folder) or pre-created by someone else. So every entry is
signed: its metadata and its compiled code carry an HMAC-SHA256 under a secret key, checked before
either is used; an entry that does not verify is a miss, repaired again and written over. The key is

* ``$MEND_REPAIR_CACHE_KEY``: a file holding the key, for a cache shared on purpose (every member of the
  team reads the same key file; entries are then written readable by the group), or
* by default a per-user key, ``$XDG_CONFIG_HOME/mend/repair-cache.key`` (``~/.config/...``), created on
  first use, readable by its owner only: entries written by anyone else never verify.

A key file that is not a regular file, or (the per-user default) is owned by another user or readable
by others, is refused: the hook then repairs without the cache and says why. Files in the cache are
opened without following links and without blocking (a FIFO planted as an entry is skipped), and only
if they are regular (:func:`mend.safeio.read_regular`). Standard library only: the warm path of every import runs here.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import stat
from pathlib import Path

from mend.safeio import MAX_FILE_BYTES, read_regular
from mend.settings import REPAIR_CACHE_KEY

KEY_ENV_VAR = REPAIR_CACHE_KEY.name


class UntrustedCache(Exception):
    """The key cannot be trusted: the cache is not used."""


def key_file() -> tuple[Path, bool]:
    """(the key file, whether it is the team's shared one)."""
    env = REPAIR_CACHE_KEY.get()
    if env is not None:
        return env, True
    base = Path(os.environ.get("XDG_CONFIG_HOME") or Path.home() / ".config")
    return base / "mend" / "repair-cache.key", False


_KEYS: dict[str, bytes] = {}


def load_key() -> tuple[bytes, bool]:
    """(the signing key, shared); :class:`UntrustedCache` when it cannot be trusted."""
    path, shared = key_file()
    cached = _KEYS.get(str(path))
    if cached is not None:
        return cached, shared
    if not shared and not path.exists():
        _create(path)
    data = read_regular(path, 4096)
    if data is None:
        raise UntrustedCache(f"the repair-cache key {path} is not a readable regular file")
    if not shared:
        st = os.stat(path)
        if hasattr(os, "getuid") and st.st_uid != os.getuid():
            raise UntrustedCache(f"the repair-cache key {path} belongs to another user")
        if st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
            raise UntrustedCache(f"the repair-cache key {path} is readable by others (chmod 600 it)")
    key = data.strip()
    if len(key) < 16:
        raise UntrustedCache(f"the repair-cache key {path} is too short")
    _KEYS[str(path)] = key
    return key, shared


def _create(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:  # another process made it first
        return
    with os.fdopen(fd, "w") as fh:
        fh.write(secrets.token_hex(32) + "\n")


def sign(key: bytes, *parts: bytes) -> str:
    mac = hmac.new(key, digestmod=hashlib.sha256)
    for part in parts:
        mac.update(len(part).to_bytes(8, "little"))
        mac.update(part)
    return mac.hexdigest()


def verify(key: bytes, signature: object, *parts: bytes) -> bool:
    # compare_digest raises TypeError on a non-ASCII str: a crafted signature is a mismatch, not a crash
    return isinstance(signature, str) and signature.isascii() and hmac.compare_digest(sign(key, *parts), signature)


__all__ = ["KEY_ENV_VAR", "MAX_FILE_BYTES", "UntrustedCache", "key_file", "load_key", "read_regular", "sign", "verify"]
