"""Graph-level cache: a warm process skips lowering and scheduling.

Key: sha256 of the ATen graph's code, the input and constant metadata (shape, stride, dtype, device), the
sources of mend's compiler package, the torch version and the switches that change the scheduled graph
(``mend.settings.cache_key``: those the settings table marks ``keys_cache``). Value: the pickled
:class:`ir.ScheduledGraph` (plus the list of ops that became ATen calls). Entries live in ``$MEND_CACHE_DIR/v1/graphs/<k[:2]>/<k>.pkl``
and are published atomically; an unreadable entry is ignored (and rebuilt). ``MEND_DISABLE_CACHE=1``
turns it off.

A pickle runs code when it is loaded, so an entry is unpickled only once it is proven to be one this user
(or their team, in a shared set-up) wrote: each file is an HMAC-SHA256 of the key and the pickle, under the
signing key of :mod:`mend.imports.trust` (a per-user key, or ``MEND_REPAIR_CACHE_KEY``'s), then the pickle.
A planted, tampered, truncated or swapped entry does not verify and is rebuilt, never unpickled; files are
read only if regular (never a FIFO, no link followed). When the key cannot be trusted the cache is not
used. See ``docs/security.md``.
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import pickle
from pathlib import Path

import torch

from mend import settings
from mend.imports import trust
from mend.safeio import read_regular

from .cache import cache_root, enabled


@functools.lru_cache(maxsize=1)
def _compiler_fingerprint() -> str:
    h = hashlib.sha256()
    root = Path(__file__).parents[1]  # the compiler package: every stage's sources
    for p in sorted(root.rglob("*")):
        if p.suffix in (".py", ".h"):
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
    h.update(settings.cache_key().encode())
    return h.hexdigest()


def _target_id(t) -> str | None:
    if isinstance(t, str):
        return t
    if isinstance(t, torch._ops.OpOverload):
        return f"op:{t}"
    mod = getattr(t, "__module__", None) or type(t).__module__
    name = getattr(t, "__qualname__", None) or getattr(t, "__name__", None)
    if not name or "<" in name:  # a lambda or a local function: no stable name
        return None
    return f"{mod}.{name}"


def _arg_id(a) -> str | None:
    if isinstance(a, torch.fx.Node):
        return f"%{a.name}"
    if isinstance(a, (list, tuple)):
        parts = [_arg_id(x) for x in a]
        return None if None in parts else f"{type(a).__name__}({','.join(parts)})"
    if isinstance(a, dict):
        parts = [(repr(k), _arg_id(v)) for k, v in a.items()]
        return None if any(v is None for _, v in parts) else "{" + ",".join(f"{k}:{v}" for k, v in parts) + "}"
    if isinstance(a, (torch.Tensor, torch.fx.GraphModule)) or (callable(a) and not isinstance(a, type)):
        return None
    r = repr(a)
    return None if " at 0x" in r or "object at" in r else f"{type(a).__name__}:{r}"


def dynamo_key(gm: torch.fx.GraphModule, example_inputs) -> str | None:
    """The key of Dynamo's graph for an inference trace (``compat.trace_inference``): what the traced ATen
    graph depends on. That is every node (op, target by qualified name, arguments by value), every input's
    metadata (shape, stride, offset, dtype, device, layout, requires_grad, conj/neg bits), grad mode, the
    default dtype and mend's fingerprint (which covers the decomposition table). None where the graph holds
    something without a stable value: a module, a constant tensor, a local function, an object printed by
    address."""
    h = hashlib.sha256()
    for n in gm.graph.nodes:
        if n.op in ("call_module", "get_attr"):
            return None
        target = _target_id(n.target)
        args, kwargs = _arg_id(n.args), _arg_id(n.kwargs)
        if target is None or args is None or kwargs is None:
            return None
        h.update(f"{n.op}|{n.name}|{target}|{args}|{kwargs}\n".encode())
    for t in example_inputs:
        if not isinstance(t, torch.Tensor) or type(t) not in (torch.Tensor, torch.nn.Parameter):
            return None
        h.update(f"{_meta(t)}{t.storage_offset()}{t.layout}{t.requires_grad}{t.is_conj()}{t.is_neg()}"
                 f"{t.is_inference()}".encode())
    h.update(f"grad={torch.is_grad_enabled()} dtype={torch.get_default_dtype()}".encode())
    h.update(_compiler_fingerprint().encode())
    h.update(settings.cache_key().encode())  # the record names the scheduled graph of one setting
    return "dynamo-" + h.hexdigest()


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
    return cache_root() / "v1" / "graphs" / key[:2] / f"{key}.pkl"


_KIND = b"mend graph"


def _key() -> bytes | None:
    """The signing key, or None (the cache is then not used): see :mod:`mend.imports.trust`."""
    try:
        return trust.load_key()[0]
    except (OSError, trust.UntrustedCache):
        return None


def load(key: str):
    if not enabled():
        return None
    secret = _key()
    data = read_regular(_path(key)) if secret is not None else None
    if data is None or len(data) < 65 or data[64:65] != b"\n":
        return None
    body = data[65:]
    if not trust.verify(secret, data[:64].decode("ascii", "replace"), _KIND, key.encode(), body):
        return None  # not written by a holder of the key: never unpickled
    try:
        return pickle.loads(body)  # authenticated above (trust.verify)
    except Exception:  # a stale entry (a class that moved): rebuild
        return None


def store(key: str, value) -> None:
    if not enabled():
        return
    secret = _key()
    if secret is None:
        return
    p = _path(key)
    try:
        p.parent.mkdir(parents=True, exist_ok=True)
        buf = io.BytesIO()
        _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(value)
        body = buf.getvalue()
        tmp = p.with_suffix(f".tmp{os.getpid()}")
        tmp.write_bytes(trust.sign(secret, _KIND, key.encode(), body).encode() + b"\n" + body)
        os.replace(tmp, p)
    except Exception:  # the cache is an optimization; an unpicklable graph is simply not cached
        return
