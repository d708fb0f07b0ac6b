"""Running ``mend`` as an ordinary (non-root) user, for the permission tests.

As root, the tests create a system user (``mend-test``) and run mend as that user with ``setpriv``; the
tree lives in a folder under the system temporary folder that the user can reach. When the tests do not
run as root they already are an ordinary user and run mend as themselves. ``skip_reason()`` says why
neither works, for ``pytest.skip``.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

USER = "mend-test"
IS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def _ensure_user() -> pwd.struct_passwd | None:
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        pass
    if shutil.which("useradd") is None:
        return None
    subprocess.run(["useradd", "--system", "--no-create-home", "--shell", "/usr/sbin/nologin", USER],
                   capture_output=True, check=False)  # a parallel worker may have created it meanwhile
    try:
        return pwd.getpwnam(USER)
    except KeyError:
        return None


def prefix() -> list[str]:
    """The command prefix that runs a program as the ordinary user ([] when we are one)."""
    if not IS_ROOT:
        return []
    user = _ensure_user()
    assert user is not None
    return ["setpriv", f"--reuid={user.pw_uid}", f"--regid={user.pw_gid}", "--clear-groups"]


def uid() -> int:
    return pwd.getpwnam(USER).pw_uid if IS_ROOT else os.geteuid()


def gid() -> int:
    return pwd.getpwnam(USER).pw_gid if IS_ROOT else os.getegid()


def skip_reason() -> str | None:
    """None when mend can run as an ordinary user here, else why not."""
    if IS_ROOT:
        if _ensure_user() is None:
            return f"running as root and the user {USER} cannot be created (no useradd?)"
        if shutil.which("setpriv") is None:
            return "running as root and setpriv (util-linux) is not installed"
    probe = subprocess.run([*prefix(), sys.executable, "-c", "import mend.cli.app"], capture_output=True, text=True)
    if probe.returncode != 0:
        return f"the user {USER} cannot run {sys.executable}: {probe.stderr.strip()[-200:]}"
    return None


def mend(args: list[str], cwd: Path, timeout: float = 600) -> subprocess.CompletedProcess[str]:
    """``mend ARGS`` as the ordinary user."""
    return subprocess.run([*prefix(), sys.executable, "-m", "mend.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


@contextlib.contextmanager
def shared_folder() -> Iterator[Path]:
    """A fresh folder the ordinary user can reach (pytest's own temporary folders are private to root)."""
    folder = Path(tempfile.mkdtemp(prefix="mend-files-"))
    folder.chmod(0o755)
    try:
        yield folder
    finally:
        for path in [folder, *folder.rglob("*")]:
            if not path.is_symlink():
                if shutil.which("chattr") and path.is_file():
                    subprocess.run(["chattr", "-i", str(path)], capture_output=True, check=False)
                path.chmod(0o755 if path.is_dir() else 0o644)
        shutil.rmtree(folder, ignore_errors=True)


def set_immutable(path: Path) -> bool:
    """``chattr +i`` (root only, and only where the file system supports it)."""
    if not IS_ROOT or shutil.which("chattr") is None:
        return False
    return subprocess.run(["chattr", "+i", str(path)], capture_output=True).returncode == 0
