"""Build a graph's generated Triton module: write it into the on-disk cache and import it.

Triton's ``@jit`` needs the kernel source in a real file: :func:`load_module` writes one generated Python
module per graph into ``$MEND_CACHE_DIR/v1/triton/<k[:2]>/`` (published atomically; the key hashes the
source, the Triton and torch versions) and imports it. Triton keeps its own compiled cubins in its cache
(``~/.triton/cache``); the ahead-of-time compile workers (``aot.py``) fill it before the first launch.
``TRITON_INTERPRET=1`` (CPU-only machines) runs the same modules in Triton's interpreter.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import threading
from pathlib import Path

import torch
import triton

from ...runtime import cache

STATS = {"modules": 0, "module_hits": 0}
_lock = threading.RLock()
_modules: dict[str, object] = {}


def interpret_mode() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0").lower() in ("1", "true", "yes", "on")


def triton_version() -> str:
    return getattr(triton, "__version__", "unknown")


def source_key(source: str) -> str:
    h = hashlib.sha256()
    for part in (source, triton_version(), torch.__version__, "mend-triton-v1"):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def load_module(source: str):
    """Write ``source`` into the cache (once) and import it; returns the module."""
    key = source_key(source)
    with _lock:
        mod = _modules.get(key)
        if mod is not None:
            STATS["module_hits"] += 1
            return mod
        if not cache.enabled():
            d = Path(tempfile.mkdtemp(prefix="mend_triton_"))
        else:
            d = cache.cache_root() / "v1" / "triton" / key[:2]
        d.mkdir(parents=True, exist_ok=True)
        path = d / f"mend_k_{key[:40]}.py"
        if not path.exists():
            tmp = d / f".{path.name}.{os.getpid()}_{threading.get_ident()}.tmp"
            tmp.write_text(source)
            os.replace(tmp, path)
        name = f"mend_triton_{key[:24]}"
        spec = importlib.util.spec_from_file_location(name, path)
        mod = importlib.util.module_from_spec(spec)
        sys.modules[name] = mod  # triton resolves the kernel's globals through its module
        try:
            spec.loader.exec_module(mod)
        except BaseException:
            sys.modules.pop(name, None)
            raise
        _modules[key] = mod
        STATS["modules"] += 1
        return mod
