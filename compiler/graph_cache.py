"""Graph-level cache: a warm process skips lowering and scheduling.

Key: sha256 of the ATen graph's code, the input and constant metadata (shape, stride, dtype, device), the
sources of mend's compiler package and the torch version. Value: the pickled :class:`ir.ScheduledGraph`
(plus the list of ops that became ATen calls). Entries live in ``$MEND_CACHE_DIR/v1/graphs/<k[:2]>/<k>.pkl``
and are published atomically; an unreadable entry is ignored (and rebuilt). ``MEND_DISABLE_CACHE=1``
turns it off.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import pickle
from pathlib import Path

import torch

from . import runtime_cpp


@functools.lru_cache(maxsize=1)
def _compiler_fingerprint() -> str:
    h = hashlib.sha256()
    root = Path(__file__).parent
    for p in sorted(root.rglob("*")):
        if p.suffix in (".py", ".h") and "bench" not in p.parts:
            h.update(p.name.encode())
            h.update(p.read_bytes())
    h.update(torch.__version__.encode())
    return h.hexdigest()


def _meta(t) -> str:
    if isinstance(t, torch.Tensor):
        return f"T{tuple(t.shape)}{tuple(t.stride())}{t.dtype}{t.device.type}"
    return f"V{type(t).__name__}:{t!r}"


def graph_key(gm: torch.fx.GraphModule, example_inputs) -> str:
    h = hashlib.sha256()
    h.update(gm.code.encode())
    for t in example_inputs:
        h.update(_meta(t).encode())
    for n in gm.graph.nodes:
        if n.op == "get_attr":
            h.update(f"{n.target}={_meta(getattr(gm, n.target, None))}".encode())
    h.update(_compiler_fingerprint().encode())
    return h.hexdigest()


def _resolve_op(qualname: str, overload: str):
    ns, name = qualname.split("::")
    packet = getattr(getattr(torch.ops, ns), name)
    return getattr(packet, overload)


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj):
        if isinstance(obj, torch._ops.OpOverload):
            return _resolve_op, (obj._schema.name, obj._overloadname)
        return NotImplemented


def _path(key: str) -> Path:
    return runtime_cpp.cache_root() / "v1" / "graphs" / key[:2] / f"{key}.pkl"


def enabled() -> bool:
    return os.environ.get("MEND_DISABLE_CACHE") != "1"


def load(key: str):
    if not enabled():
        return None
    p = _path(key)
    try:
        with open(p, "rb") as f:
            return pickle.load(f)
    except FileNotFoundError:
        return None
    except Exception:  # a stale or damaged entry: rebuild
        return None


def store(key: str, value) -> None:
    if not enabled():
        return
    p = _path(key)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
        tmp = p.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(buf.getvalue())
        os.replace(tmp, p)
    except Exception:  # the cache is an optimization; an unpicklable graph is simply not cached
        return
