"""CUDA graphs for launch-bound compiled graphs (``mode="reduce-overhead"`` or ``options={"cudagraphs": True}``).

A compiled graph of many small kernels spends most of its time launching them from Python. With CUDA
graphs on, the wrapper runs normally once (kernels compile, autotune and load), is then captured into a
CUDA graph, and later calls replay it: one launch for the whole graph.

What stays exactly as without CUDA graphs:

* **Inputs.** Parameters and buffers (tensors Dynamo marks as static, whose addresses do not change) are
  captured in place. Every other tensor input is copied into a private static buffer before each replay,
  with the input's strides (an expanded view's distinct elements once, read through the same strides);
  the caller's tensors are never written.
* **Outputs.** Each replay writes the same static output buffers, so outputs are copied out (per storage,
  with the same offsets and strides) before they are returned: a result the caller keeps is never
  overwritten by a later call.
* **Outputs that are inputs or views of inputs** (a training forward returns its inputs for the
  backward) are rebuilt at each replay as the same view of the caller's own tensor, not of the static copy.
* **Fallbacks**, each logged once, run the plain compiled graph: a graph that mutates its inputs, a graph
  with a side effect (a print or message a replay would not make again), a graph with CPU tensors, a capture that fails (e.g. an op that synchronizes), and a
  call whose inputs differ from the captured ones in shape, stride, dtype or device. A static input that
  moved (a parameter replaced) triggers a new capture.
"""

from __future__ import annotations

import torch

from mend import settings

from .. import compat
from ..debug import warn_once
from ..lowering import graph_device

STATS = {"captured": 0, "replays": 0, "fallback_calls": 0, "declined": 0}
MAX_CAPTURES = 4



def _copy_all(dsts: list, srcs: list) -> None:
    """``dst.copy_(src)`` for each pair, as one call: a training step hands a hundred saved activations
    between the forward's and the backward's graphs, and one copy call each costs more host time than the
    replay itself."""
    if hasattr(torch, "_foreach_copy_"):
        torch._foreach_copy_(dsts, srcs)
    else:  # torch without the multi-tensor copy
        for d, s in zip(dsts, srcs):
            d.copy_(s)


def requested(kwargs: dict) -> bool:
    """Whether the backend call asks for CUDA graphs: ``mode="reduce-overhead"``,
    ``options={"cudagraphs": True}``, or ``MEND_CUDAGRAPHS=1`` (``0`` turns them off everywhere)."""
    env = settings.CUDAGRAPHS.get()
    if env is not None:
        return env
    opts = kwargs.get("options") or {}
    if "cudagraphs" in opts:
        return bool(opts["cudagraphs"])
    return kwargs.get("mode") == "reduce-overhead"


def _is_static(t: torch.Tensor) -> bool:
    return isinstance(t, torch.nn.Parameter) or getattr(t, "_dynamo_static_input_type", None) is not None


def decline_reason(gm: torch.fx.GraphModule, sg, example_inputs) -> str | None:
    """Why this graph cannot be replayed as a CUDA graph (None: it can)."""
    for n in gm.graph.nodes:
        if n.op == "call_function":
            if compat.is_with_effects(n.target) or compat.is_effectful(n.target):
                return "it has a side effect a replay would not repeat (a print or a kept message)"
            schema = getattr(n.target, "_schema", None)
            if schema is not None and schema.is_mutable:
                return f"it mutates a tensor in place ({n.target})"
    for t in example_inputs:
        if isinstance(t, torch.Tensor) and t.device.type != "cuda":
            return "it has a tensor that is not on the GPU"
    return None


def static_layout(t: torch.Tensor) -> tuple | None:
    """(shape, stride) of the static buffer an input is copied into: ``t``'s own strides, its expanded dims
    (stride 0: a gradient of a mean arrives as a scalar expanded to the output's shape) at size 1, so the
    buffer holds each distinct element once and the graph reads it as ``t``. None when distinct positions
    share memory otherwise (an ``as_strided`` view that overlaps itself): no buffer reproduces that."""
    shape = tuple(1 if st == 0 else sz for sz, st in zip(t.shape, t.stride()))
    reach = 0  # the furthest element the dims of smaller strides reach
    for st, sz in sorted((st, sz) for sz, st in zip(shape, t.stride()) if sz != 1):
        if st <= reach:
            return None
        reach += st * (sz - 1)
    return shape, tuple(t.stride())


def _meta(t):
    if isinstance(t, torch.Tensor):
        return (tuple(t.shape), t.stride(), t.dtype, t.device)
    return ("value", t)


class CudaGraphCall:
    """A boxed callable (``call(list_of_args)``) that replays ``call`` as a CUDA graph."""

    _boxed_call = True

    def __init__(self, call, name: str, device=None) -> None:
        self.call = call
        self.name = name
        self.device = device  # the graph's device: what a graph without tensor inputs synchronizes
        self.warmed = False
        self.graph = None
        self.disabled = False
        self.captures = 0

    def _plain(self, args):
        STATS["fallback_calls"] += 1
        return self.call(args)

    def __call__(self, args):
        if self.disabled:
            return self.call(args)
        if not self.warmed:  # first call: kernels compile, autotune and load outside any capture
            self.warmed = True
            return self.call(args)
        if self.graph is not None:
            if len(args) != len(self.static_inputs) or [_meta(args[i]) for i in self.copy_idx] != self.metas:
                warn_once(f"mend: CUDA graph of {self.name} not replayed for inputs of another shape or type")
                return self._plain(args)
            for i in self.static_idx:
                if args[i].data_ptr() != self.static_inputs[i].data_ptr():
                    self.graph = None  # a parameter moved: capture again
                    break
        if self.graph is None:
            if self.captures >= MAX_CAPTURES:
                self.disabled = True
                warn_once(f"mend: CUDA graph of {self.name} captured {MAX_CAPTURES} times; it runs without")
                return self._plain(args)
            try:
                self._capture(args)
            except Exception as exc:  # noqa: BLE001 - the plain graph always works
                self.disabled = True
                self.graph = None
                STATS["declined"] += 1
                warn_once(f"mend: CUDA graph capture of {self.name} failed ({type(exc).__name__}: "
                          f"{str(exc).strip().splitlines()[0] if str(exc).strip() else ''}); it runs without")
                return self._plain(args)
        return self._replay(args)

    def _capture(self, args) -> None:
        self.captures += 1
        self.static_idx = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and _is_static(a)]
        self.copy_idx = [i for i, a in enumerate(args) if isinstance(a, torch.Tensor) and i not in self.static_idx]
        self.metas = [_meta(args[i]) for i in self.copy_idx]
        self.buffers = {}  # input index -> (static buffer of its distinct elements, their layout)
        static = list(args)
        for i in self.copy_idx:
            a = args[i]
            layout = static_layout(a)
            if layout is None:
                raise NotImplementedError(f"input {i} overlaps itself in memory")
            buf = torch.empty_strided(*layout, dtype=a.dtype, device=a.device)
            self.buffers[i] = (buf, layout)
            static[i] = buf.as_strided(a.shape, a.stride())
        self.static_inputs = static
        self._copy_in(args)
        dev = next((a.device for a in args if isinstance(a, torch.Tensor)), self.device)
        if dev is None:
            raise NotImplementedError("no tensor input and no device given")
        torch.cuda.synchronize(dev)
        settle = getattr(self.call, "mend_settle", None)
        if settle is not None:  # kernels tuning in the background choose now: the capture keeps what it records
            settle()
        # one run on a side stream first (what torch.cuda.graphs recommends: lazy initialisation of
        # cuBLAS workspaces and allocator state happens outside the capture)
        side = torch.cuda.Stream(dev)
        side.wait_stream(torch.cuda.current_stream(dev))
        with torch.cuda.stream(side):
            self.call(list(static))
        torch.cuda.current_stream(dev).wait_stream(side)
        torch.cuda.synchronize(dev)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            outs = self.call(list(static))
        self.static_outputs = list(outs)
        # outputs that alias an input (same storage): rebuilt from the caller's tensor at each replay
        self.aliases = {}
        storages = {}
        for i, a in enumerate(static):
            if isinstance(a, torch.Tensor):
                storages.setdefault(a.untyped_storage().data_ptr(), i)
        for j, o in enumerate(self.static_outputs):
            if isinstance(o, torch.Tensor):
                i = storages.get(o.untyped_storage().data_ptr())
                if i is not None:
                    self.aliases[j] = (i, tuple(o.shape), o.stride(), o.storage_offset() - static[i].storage_offset())
        # every other output is copied out per storage, keeping offsets, strides and aliasing between outputs
        # (aot_autograd rebuilds views of an intermediate from their metadata)
        groups: dict[int, tuple] = {}
        for j, o in enumerate(self.static_outputs):
            if isinstance(o, torch.Tensor) and j not in self.aliases:
                st = o.untyped_storage()
                if st.data_ptr() not in groups:
                    flat = torch.empty(0, dtype=torch.uint8, device=o.device).set_(st, 0, (st.nbytes(),), (1,))
                    groups[st.data_ptr()] = (flat, [])
                groups[st.data_ptr()][1].append((j, o.dtype, o.storage_offset(), tuple(o.shape), o.stride()))
        self.groups = list(groups.values())
        self.graph = g
        STATS["captured"] += 1

    def _copy_in(self, args) -> None:
        if self.buffers:
            _copy_all([buf for buf, _ in self.buffers.values()],
                      [args[i].as_strided(shape, stride, args[i].storage_offset())
                       for i, (_, (shape, stride)) in self.buffers.items()])

    def _replay(self, args):
        self._copy_in(args)
        self.graph.replay()
        STATS["replays"] += 1
        out = list(self.static_outputs)
        flats = [flat for flat, _ in self.groups]
        copies = [torch.empty_like(flat) for flat in flats]
        if copies:
            _copy_all(copies, flats)
        for copy, (flat, members) in zip(copies, self.groups):
            st = copy.untyped_storage()
            for j, dtype, off, size, stride in members:
                out[j] = torch.empty(0, dtype=dtype, device=flat.device).set_(st, off, size, stride)
        for j, (i, size, stride, delta) in self.aliases.items():
            a = args[i]
            out[j] = a.as_strided(size, stride, a.storage_offset() + delta)
        args.clear()
        return out


def wrap(call, gm, sg, example_inputs, name: str):
    """``call`` replayed as a CUDA graph, or ``call`` itself when the graph cannot be (reason logged once)."""
    why = decline_reason(gm, sg, example_inputs)
    if why is not None:
        STATS["declined"] += 1
        warn_once(f"mend: no CUDA graph for {name}: {why}")
        return call
    return CudaGraphCall(call, name, graph_device(gm, example_inputs))
