"""Build generated C++ with g++ into an on-disk cache and load it with ctypes.

Cache key: sha256 of (source, compiler argv, ``g++ --version``, the CPU's ISA flags, mend/torch versions).
Layout: ``$MEND_CACHE_DIR`` (default ``${XDG_CACHE_HOME:-~/.cache}/mend``) ``/v1/cpp/<k[:2]>/<k>.so``.
Publishing is atomic (build to a temporary name, then ``os.replace``), so concurrent processes (pytest-xdist)
at worst compile the same kernel twice. ``MEND_DISABLE_CACHE=1`` builds into a fresh temporary directory.
"""

from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import platform
import shutil
import subprocess
import tempfile
import threading
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

import torch

from ...runtime import cache

CXX = os.environ.get("CXX", "g++")
# -O2 rather than -O3 (benchmarks/compiler_flags.py, g++ 12, shared 2-core box): g++ time 0.89-0.93x of
# -O3's in three of four runs (1.06x in one), kernel runtime 0.99-1.02x; the hot loops are `omp simd` loops,
# which are vectorized at -O2 too. -ftree-vectorize keeps the other loops vectorized on g++ < 12.
FLAGS = [
    "-O2",
    "-ftree-vectorize",
    "-march=native",
    "-fopenmp",
    "-fno-math-errno",
    "-fno-trapping-math",
    "-ffp-contract=off",
    "-fno-semantic-interposition",
    "-std=c++17",
    "-shared",
    "-fPIC",
    "-w",
]
_loaded: dict[str, ctypes.CDLL] = {}
_lock = threading.Lock()
STATS = {"compiles": 0, "hits": 0}


class CompileError(RuntimeError):
    pass


@functools.lru_cache(maxsize=1)
def toolchain_fingerprint() -> str:
    if shutil.which(CXX) is None:
        raise CompileError(f"C++ compiler {CXX!r} not found (set CXX or install g++)")
    ver = subprocess.run([CXX, "--version"], capture_output=True, text=True).stdout
    isa = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                isa = line
                break
    except OSError:
        isa = platform.processor()
    try:
        mend_v = version("mend")
    except PackageNotFoundError:
        mend_v = "dev"
    return "\n".join([ver, isa, torch.__version__, mend_v])


def cache_key(source: str) -> str:
    h = hashlib.sha256()
    for part in (source, " ".join([CXX] + FLAGS), toolchain_fingerprint()):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def build(source: str) -> Path:
    """Compile ``source`` to a shared library (cached); returns its path."""
    key = cache_key(source)
    if not cache.enabled():
        d = Path(tempfile.mkdtemp(prefix="mend_cpp_"))
    else:
        d = cache.cache_root() / "v1" / "cpp" / key[:2]
    so = d / f"{key}.so"
    if so.exists():
        STATS["hits"] += 1
        return so
    d.mkdir(parents=True, exist_ok=True)
    tmp = f"{os.getpid()}_{threading.get_ident()}"
    cpp = d / f"{key}.{tmp}.cpp"
    cpp.write_text(source)
    out = d / f"{key}.{tmp}.so"
    cmd = [CXX, *FLAGS, str(cpp), "-o", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        cpp.unlink(missing_ok=True)
        raise CompileError(f"g++ failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    os.replace(cpp, d / f"{key}.cpp")
    os.replace(out, so)
    STATS["compiles"] += 1
    return so


def load(path: Path) -> ctypes.CDLL:
    with _lock:
        lib = _loaded.get(str(path))
        if lib is None:
            lib = ctypes.CDLL(str(path))
            _loaded[str(path)] = lib
        return lib


def kernel_function(lib: ctypes.CDLL, name: str, nargs: int):
    fn = getattr(lib, name)
    fn.argtypes = [ctypes.c_void_p] * nargs
    fn.restype = None
    return fn
