"""A Triton compile worker: compiles generated kernels ahead of time, for an explicit GPU target.

Run as a separate process by :mod:`mend.compiler.triton_aot` (never imported as part of ``mend.compiler``
in the worker, so a worker imports Triton only: no torch, no CUDA context). Protocol on stdin/stdout:
frames of a 4-byte little-endian length plus a pickled object; a request is a job dict (see
:func:`compile_job`), the reply the result dict. EOF on stdin ends the worker. Anything Triton prints
goes to stderr, never into the protocol stream.

The parent process can also call :func:`compile_job` in-process (no pool, ``MEND_COMPILE_WORKERS=0``).
"""

from __future__ import annotations

import importlib.util
import os
import pickle
import struct
import sys

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
    order), ``constexprs`` ({name: value}), ``num_warps``, ``target`` ((backend, arch, warp_size))."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.compiler.compiler import make_backend

    fn = getattr(_module(job["path"], job["module"]), job["fn"])
    target = GPUTarget(*job["target"])
    sig = dict(job["signature"])
    src = ASTSource(fn=fn, signature=sig, constexprs=dict(job["constexprs"]),
                    attrs=_attrs(make_backend(target), sig))
    ck = triton.compile(src, target=target, options={"num_warps": job["num_warps"]})
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


def _read(stream):
    head = stream.read(4)
    if len(head) < 4:
        return None
    (n,) = struct.unpack("<I", head)
    data = stream.read(n)
    if len(data) < n:
        return None
    return pickle.loads(data)


def _write(stream, obj) -> None:
    data = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(struct.pack("<I", len(data)) + data)
    stream.flush()


def main() -> None:
    proto_in = os.fdopen(os.dup(0), "rb")
    proto_out = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # stray prints (Triton, MLIR) go to stderr, not into the protocol
    try:  # the expensive one-time parts of Triton's first compile: its import and its own cache key
        import triton  # noqa: F401
        from triton.runtime.cache import triton_key

        triton_key()
    except Exception:  # noqa: BLE001 - the first job reports the real error
        pass
    _write(proto_out, {"ready": os.getpid()})
    while True:
        job = _read(proto_in)
        if job is None:
            return
        try:
            res = compile_job(job)
        except BaseException as exc:  # noqa: BLE001 - the parent falls back to Triton's own JIT
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            res = {"error": f"{type(exc).__name__}: {first}"[:500]}
        _write(proto_out, res)


if __name__ == "__main__":
    main()
