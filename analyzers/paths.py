"""Where mend may write: inside the paths it was given, never through a link that leads elsewhere.

Every command that writes files checks its targets here: ``mend fix`` writes only files whose real path
lies under a path the user named, and a default location (``.mend/run.json``, ``.mend_cache/``, the
repair cache's folders) is used only while it resolves inside the folder it belongs to. A path the user
names is written as named, links included.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path


def is_under(path: str, root: str) -> bool:
    """Whether the real path ``path`` is ``root`` or lies below it (both real paths)."""
    return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


def within(path: str | Path, roots: Iterable[str | Path]) -> bool:
    """Whether ``path`` resolves (links followed) to one of ``roots`` or below one of them (resolved too)."""
    real = os.path.realpath(path)
    return any(is_under(real, os.path.realpath(r)) for r in roots)


def escaping(paths: Iterable[str | Path], base: str | Path) -> Path | None:
    """The first of ``paths`` (places mend would write to or into) that resolves outside ``base``, else None."""
    return next((Path(p) for p in paths if not within(p, [base])), None)


def default_refused(path: str | Path, base: str | Path, option: str) -> str | None:
    """Why mend does not write its default output ``path`` (relative to ``base``): a folder on the way is
    a link out of ``base``; None when it may. ``option`` names the switch that chooses another place."""
    folder = Path(base) / Path(path).parent
    if within(folder, [base]):
        return None
    return (f"{folder} leads to {os.path.realpath(folder)}, outside {base}, through a link; mend writes "
            f"its default {Path(path).name} only inside {base} ({option} names another place)")


__all__ = ["default_refused", "escaping", "is_under", "within"]
