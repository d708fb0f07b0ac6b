"""Where mend's on-disk caches live.

Every cache of the compiler lives under :func:`cache_root` (``$MEND_CACHE_DIR``, default
``${XDG_CACHE_HOME:-~/.cache}/mend``): built C++ libraries (``v1/cpp``, ``codegen/cpp/build.py``), generated
Triton modules and launch-configuration choices (``v1/triton``, ``codegen/triton/``), Triton's remembered
cache key (``triton_key.json``, ``codegen/triton/worker.py``) and scheduled graphs (``v1/graphs``,
``graph_cache.py``). Entries are published atomically (written to a temporary name, then renamed).
``MEND_DISABLE_CACHE=1`` (:func:`enabled` is False) builds into fresh temporary directories and reads
nothing back.
"""

from __future__ import annotations

import os
from pathlib import Path

from mend import settings


def cache_root() -> Path:
    d = settings.CACHE_DIR.get()
    if d is not None:
        return d
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "mend"


def enabled() -> bool:
    """False under ``MEND_DISABLE_CACHE=1``: nothing is read from or published to the caches."""
    return not settings.DISABLE_CACHE.get()
