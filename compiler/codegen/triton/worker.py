"""A Triton compile worker: compiles generated kernels ahead of time, for an explicit GPU target.

Run as a separate process by :mod:`mend.compiler.codegen.triton.aot`, as a script (never imported as part
of ``mend.compiler`` in the worker, so a worker imports Triton only: no torch, no CUDA context). The main
process imports this module too (``aot`` calls :func:`compile_job` in-process without a pool), so Triton is
imported inside the functions that use it, never when the module loads. Protocol on stdin/stdout:
frames of a 4-byte little-endian length plus a JSON object (:func:`encode_frame`: plain data, tuples
and bytes tagged; never a pickle, so a frame cannot run code in the process that reads it); a request is
a job dict (see :func:`compile_job`), the reply the result dict. EOF on stdin ends the worker. Anything Triton prints
goes to stderr, never into the protocol stream.

With a target on the command line (``backend:arch:warp_size``) a worker that has no job waiting once
Triton is imported compiles a tiny kernel for that target into a throwaway cache: Triton's first compile
in a process sets up its compiler pipeline (about 0.3 s more than the next one), so without this the
first kernel that reaches each worker pays for it.

The parent process can also call :func:`compile_job` in-process (no pool, ``MEND_COMPILE_WORKERS=0``).
"""

from __future__ import annotations

import base64
import hashlib
import importlib.util
import json
import os
import select
import shutil
import struct
import sys
import tempfile

_modules: dict = {}


def _module(path: str, name: str):
    mod = _modules.get(path)
    if mod is None:
        mod = sys.modules.get(name)
        if mod is None or getattr(mod, "__file__", None) != path:
            spec = importlib.util.spec_from_file_location(name, path)
            mod = importlib.util.module_from_spec(spec)
            sys.modules[name] = mod  # triton resolves a kernel's globals through its module
            spec.loader.exec_module(mod)
        _modules[path] = mod
    return mod


def _attrs(backend, signature: dict) -> dict:
    """Every pointer argument is specialized as 16-byte aligned (what Triton's JIT does for aligned
    tensors): the launcher checks the alignment before it uses the kernel."""
    parse = getattr(backend, "parse_attr", None)
    if parse is None:
        return {}
    return {(i,): parse("D") for i, ty in enumerate(signature.values()) if ty.startswith("*")}


def compile_job(job: dict) -> dict:
    """Compile one kernel configuration; returns what a launcher needs to load and launch the cubin.

    ``job``: ``path`` and ``module`` (the generated module's file and import name), ``fn`` (the
    ``@triton.jit`` function's name), ``signature`` ({param: triton type or "constexpr"}, in parameter
    order), ``constexprs`` ({name: value}), ``options`` (``num_warps``, maybe ``num_stages``), ``target``
    ((backend, arch, warp_size))."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend

    fn = getattr(_module(job["path"], job["module"]), job["fn"])
    target = GPUTarget(*job["target"])
    sig = dict(job["signature"])
    src = ASTSource(fn=fn, signature=sig, constexprs=dict(job["constexprs"]),
                    attrs=_attrs(make_backend(target), sig))
    ck = triton.compile(src, target=target, options=dict(job["options"]))
    md = ck.metadata
    binary = next((p for k, p in ck.metadata_group.items() if k.endswith(".cubin")), None)
    return {
        "name": md.name,
        "cubin_path": binary,
        "cubin": ck.asm.get("cubin") if binary is None else None,
        "shared": md.shared,
        "num_warps": md.num_warps,
        "num_ctas": getattr(md, "num_ctas", 1),
        "global_scratch_size": getattr(md, "global_scratch_size", None),
        "profile_scratch_size": getattr(md, "profile_scratch_size", None),
        "launch_pdl": bool(getattr(md, "launch_pdl", False)),
        "launch_cooperative_grid": bool(getattr(md, "launch_cooperative_grid", False)),
        "arg_types": [ty for ty in sig.values() if ty != "constexpr"],
        "hash": ck.hash,
    }


def _tag(obj):
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    if isinstance(obj, (bytes, bytearray)):
        return {"@b": base64.b64encode(bytes(obj)).decode("ascii")}
    if isinstance(obj, tuple):
        return {"@t": [_tag(v) for v in obj]}
    if isinstance(obj, list):
        return [_tag(v) for v in obj]
    if isinstance(obj, dict) and all(isinstance(k, str) for k in obj):
        return {"@d": {k: _tag(v) for k, v in obj.items()}}
    raise TypeError(f"a compile job or result cannot hold a {type(obj).__name__}")


def _untag(obj):
    if isinstance(obj, list):
        return [_untag(v) for v in obj]
    if isinstance(obj, dict):
        if set(obj) == {"@b"} and isinstance(obj["@b"], str):
            return base64.b64decode(obj["@b"], validate=True)
        if set(obj) == {"@t"} and isinstance(obj["@t"], list):
            return tuple(_untag(v) for v in obj["@t"])
        if set(obj) == {"@d"} and isinstance(obj["@d"], dict):
            return {k: _untag(v) for k, v in obj["@d"].items()}
        raise ValueError("not a frame of the compile protocol")
    return obj


def encode_frame(obj) -> bytes:
    """``obj`` (None, bool, int, float, str, bytes, tuple, list, dict with str keys) as a frame's JSON."""
    return json.dumps(_tag(obj), separators=(",", ":"), allow_nan=True).encode("utf-8")


def decode_frame(data: bytes):
    """The value :func:`encode_frame` wrote; ``ValueError`` for anything else."""
    try:
        return _untag(json.loads(data.decode("utf-8")))
    except (UnicodeDecodeError, RecursionError, TypeError) as exc:
        raise ValueError(f"not a frame of the compile protocol: {exc}") from None


def _read(stream):
    head = stream.read(4)
    if len(head) < 4:
        return None
    (n,) = struct.unpack("<I", head)
    data = stream.read(n)
    if len(data) < n:
        return None
    return decode_frame(data)


def _write(stream, obj) -> None:
    data = encode_frame(obj)
    stream.write(struct.pack("<I", len(data)) + data)
    stream.flush()


_WARM_KERNEL = """import triton
import triton.language as tl


@triton.jit
def mend_warm(x, y, n, BLOCK: tl.constexpr):
    o = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = o < n
    v = tl.load(x + o, mask=m, other=0.0)
    s = tl.sum(tl.where(m, tl.exp(v) * v, 0.0), 0)
    tl.store(y + o, tl.sigmoid(v) * s + 1.0, mask=m)
"""


def warm_up(target: tuple) -> bool:
    """Compile a tiny kernel for ``target`` (backend, arch, warp_size) into a temporary Triton cache that
    is removed afterwards: the compile always runs (never a cache hit) and leaves nothing behind."""
    tmp = tempfile.mkdtemp(prefix="mend_triton_warm_")
    saved = os.environ.get("TRITON_CACHE_DIR")
    try:
        path = os.path.join(tmp, "mend_warm_kernel.py")
        with open(path, "w") as f:
            f.write(_WARM_KERNEL)
        os.environ["TRITON_CACHE_DIR"] = os.path.join(tmp, "cache")
        compile_job({"path": path, "module": "mend_warm_kernel", "fn": "mend_warm",
                     "signature": {"x": "*fp32", "y": "*fp32", "n": "i32", "BLOCK": "constexpr"},
                     "constexprs": {"BLOCK": 256}, "options": {"num_warps": 4}, "target": tuple(target)})
        return True
    except Exception:  # noqa: BLE001 - warming is optional; a real job reports real errors
        return False
    finally:
        if saved is None:
            os.environ.pop("TRITON_CACHE_DIR", None)
        else:
            os.environ["TRITON_CACHE_DIR"] = saved
        _modules.pop(os.path.join(tmp, "mend_warm_kernel.py"), None)
        sys.modules.pop("mend_warm_kernel", None)
        shutil.rmtree(tmp, ignore_errors=True)


def _triton_stamp(cache_module) -> str:
    """What Triton's own key is computed from, by name, size and modification time (no contents read):
    the version, ``runtime/cache.py``, the ``compiler``, ``backends`` and ``language`` packages, ``_C``."""
    import triton

    root = os.path.dirname(os.path.dirname(os.path.abspath(cache_module.__file__)))
    h = hashlib.sha256(f"{triton.__version__}|{sys.version}|{root}".encode())
    files = [os.path.abspath(cache_module.__file__)]
    for sub in ("compiler", "backends", "language", "_C"):
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, sub)):
            dirnames.sort()
            files += [os.path.join(dirpath, f) for f in sorted(filenames)
                      if f.endswith((".py", ".so")) and "__pycache__" not in dirpath]
    for path in files:
        st = os.stat(path)
        h.update(f"{path}|{st.st_size}|{st.st_mtime_ns}\n".encode())
    return h.hexdigest()


def remembered_triton_key(store: "str | None") -> str:
    """Triton keys its cache by a hash of its own sources and its 500 MB ``libtriton`` (``triton_key``,
    computed once per process: 0.4-0.8 s, most of a worker's start-up). With ``store`` (a file in mend's
    cache) the key is reused while nothing it hashes has changed name, size or modification time, and
    installed as the process's ``triton_key``; otherwise it is computed and remembered. Any surprise
    (another Triton layout, an unreadable file) leaves Triton's own function in place."""
    from triton.runtime import cache as rc

    real = rc.triton_key
    if not store:
        return real()
    try:
        stamp = _triton_stamp(rc)
    except (OSError, AttributeError, TypeError):
        return real()
    key = None
    try:
        with open(store) as f:
            saved = json.load(f)
        if isinstance(saved, dict) and saved.get("stamp") == stamp and isinstance(saved.get("key"), str):
            key = saved["key"]
    except (OSError, ValueError):
        pass
    if key is None:
        key = real()
        try:
            os.makedirs(os.path.dirname(store) or ".", exist_ok=True)
            tmp = f"{store}.{os.getpid()}.tmp"
            with open(tmp, "w") as f:
                json.dump({"stamp": stamp, "key": key}, f)
            os.replace(tmp, store)
        except OSError:
            pass
        return key

    def triton_key() -> str:
        return key

    rc.triton_key = triton_key
    return key


def parse_target(text: str):
    """``"cuda:90:32"`` -> ("cuda", 90, 32); None for anything else."""
    parts = text.split(":")
    if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
        return None
    return (parts[0], int(parts[1]), int(parts[2]))


def _job_waiting(stream) -> bool:
    try:
        return bool(select.select([stream], [], [], 0)[0])
    except (OSError, ValueError):
        return True


def main() -> None:
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints (Triton, MLIR) go to stderr, not into the protocol
    try:  # the expensive one-time parts of Triton's first compile: its import and its own cache key
        import triton  # noqa: F401

        remembered_triton_key(os.environ.get("MEND_TRITON_KEY_FILE"))
    except Exception:  # noqa: BLE001 - the first job reports the real error
        pass
    target = parse_target(sys.argv[1]) if len(sys.argv) > 1 else None
    warmed = target is not None and not _job_waiting(proto_in) and warm_up(target)
    _write(proto_out, {"ready": os.getpid(), "warmed": warmed})
    while True:
        job = _read(proto_in)
        if job is None:
            return
        try:
            res = compile_job(job)
        except BaseException as exc:  # noqa: BLE001 - the parent falls back to Triton's own JIT
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            res = {"error": f"{type(exc).__name__}: {first}"[:500]}
        res["worker_warmed"] = warmed
        _write(proto_out, res)


if __name__ == "__main__":
    main()
