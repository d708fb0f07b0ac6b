"""mend.imports: repair the libraries a program imports, at import time, without copying them.

    import mend
    mend.repair_imports(["transformers"])      # before the program imports transformers
    import transformers                        # its modules load with `mend fix`'s (safe) repairs

or ``mend run --repair transformers train.py ARGS``. Child processes (DataLoader workers, ``torchrun``
ranks, ``multiprocessing`` spawns) repair too: the settings travel in ``MEND_REPAIR`` and the start-up
folder that reads it is put first on ``PYTHONPATH`` (:mod:`mend.imports.settings`). Repaired modules are
cached on disk (:mod:`mend.imports.cache`); ``mend repair-cache list|clear`` shows and empties the cache.
The hook itself is :mod:`mend.imports.hook`, the repair of one module :mod:`mend.imports.repair`.
Importing this package loads the standard library only (no LibCST, no analyzer, no torch).
"""

from __future__ import annotations

import os
import sys
import warnings
from collections.abc import Iterable

from mend.imports.hook import RepairHook, print_uncaught
from mend.imports.settings import ENV_VAR, RepairSettings, SettingsError, export
from mend.settings import REPAIR


class RepairWarning(UserWarning):
    """A module of a package to repair was imported before the hook was installed."""


_active: RepairHook | None = None


def repair_imports(packages: Iterable[str] | str, *, unsafe: bool = False, side_effects: str | None = None,
                   from_run: str | None = None, config_file: str | None = None, isolated: bool = False,
                   cache_dir: str | None = None, propagate: bool = True) -> RepairHook:
    """Repair the modules of ``packages`` as they are imported from now on (call it before the imports).

    ``unsafe``, ``side_effects``, ``config_file`` and ``isolated`` mean what they mean to ``mend fix``;
    ``from_run`` also repairs the sites a ``mend run`` data file recorded inside the packages. With
    ``propagate`` (the default) child processes started from now on repair too. Calling it again replaces
    the previous settings. Returns the hook (``hook.loaded``, ``hook.repaired()``, ``hook.errors``)."""
    if isinstance(packages, str):
        packages = packages.split(",")
    settings = RepairSettings(packages=tuple(packages), unsafe=unsafe, side_effects=side_effects,
                              from_run=from_run, config_file=config_file, isolated=isolated, cache_dir=cache_dir)
    hook = install(settings)
    if propagate:
        export(settings)
    early = sorted(m for m in list(sys.modules) if settings.covers(m))
    if early:
        warnings.warn(f"already imported, not repaired: {', '.join(early[:5])}"
                      f"{' ...' if len(early) > 5 else ''}; call mend.repair_imports before importing them",
                      RepairWarning, stacklevel=2)
    return hook


def install(settings: RepairSettings) -> RepairHook:
    """Put a hook for ``settings`` first on ``sys.meta_path`` (replacing an installed one), and, unless the
    program set its own, print uncaught exceptions with the repaired lines (:func:`~mend.imports.hook.print_uncaught`;
    it stays after :func:`uninstall`, as the modules loaded repaired do)."""
    global _active
    _remove()
    _active = RepairHook(settings)
    sys.meta_path.insert(0, _active)
    if sys.excepthook is sys.__excepthook__:
        sys.excepthook = print_uncaught
    return _active


def uninstall() -> None:
    """Remove the hook (modules already loaded stay as they are) and its ``MEND_REPAIR`` variable."""
    _remove()
    os.environ.pop(ENV_VAR, None)


def _remove() -> None:
    global _active
    if _active is not None and _active in sys.meta_path:
        sys.meta_path.remove(_active)
    _active = None


def active() -> RepairHook | None:
    """The installed hook, if any."""
    return _active


def install_from_env() -> RepairHook | None:
    """Install the hook that ``MEND_REPAIR`` asks for (what the start-up folder runs in a child process)."""
    value = REPAIR.raw() or ""
    if not value or _active is not None:
        return _active
    try:
        settings = RepairSettings.from_env(value)
    except SettingsError as exc:
        print(f"mend: {exc}; imports are not repaired", file=sys.stderr)
        return None
    return install(settings)


__all__ = ["ENV_VAR", "RepairHook", "RepairSettings", "RepairWarning", "SettingsError", "active", "install",
           "install_from_env", "repair_imports", "uninstall"]
