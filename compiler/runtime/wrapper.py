"""The Python wrapper of a compiled graph: allocate buffers, call kernels and extern ATen ops, return
outputs. Generated as Python source (printable, dumped for debugging) and ``exec``-ed once."""

from __future__ import annotations

import torch

from mend import settings

from .. import ir


def _as(t, size, stride, off):
    return t.as_strided(size, stride, t.storage_offset() + off)


def _restride(t, size, stride):
    out = torch.empty_strided(size, stride, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


def _allocators(device) -> tuple:
    """(fast, any): allocation of a buffer ``(size, stride, dtype)`` on ``device``. ``fast`` is torch's
    argument-parsing-free allocator (what Inductor's wrappers call: 1.2 against 2.0 us a buffer on an H200's
    host), which allocates on the current device; ``any`` names ``device`` (another device is current)."""
    device = torch.device(device)
    fast = None
    if device.type in ("cpu", "cuda"):  # the devices mend generates code for (allocator() checks a GPU's index)
        fast = getattr(torch._C._dynamo.guards, f"_empty_strided_{device.type}", None)

    def any_device(size, stride, dtype):
        return torch.empty_strided(size, stride, dtype=dtype, device=device)

    return fast or any_device, any_device


_aten = torch.ops.aten
# ATen products called through torch's own functions: an OpOverload call boxes its arguments for the
# dispatcher (13.2 against 11.6 us of host time for a product on an H200's host); same arguments, same op
_DIRECT = {_aten.mm.default: torch.mm, _aten.addmm.default: torch.addmm, _aten.bmm.default: torch.bmm,
           _aten.baddbmm.default: torch.baddbmm}
# ATen products whose result has rows that do not start 16-byte aligned (a vocabulary of 50257 or 30522
# columns): cuBLAS falls back to slow kernels for them (an sm75 CUTLASS kernel on an H200, 7x the time of
# the aligned one, whether or not the output's rows are padded). The wrapper pads the second operand's
# columns (and the bias's) with zeros instead, as Inductor's pad_mm does: op -> position of that operand.
_PADDED = {_aten.mm.default: 1, _aten.addmm.default: 2, _aten.bmm.default: 1}
_PAD_BYTES = 16
_PAD_MIN_ROWS = 1024  # fewer rows: the product reads its operand about once, and padding it costs as much


def _pads(device) -> bool:
    """On a GPU (cuBLAS's alignment rule), unless ``MEND_PAD_MM=0``."""
    return torch.device(device).type == "cuda" and settings.PAD_MM.get()


def _padded(op, at, n, pad, *args, **kwargs):
    """``op(*args, **kwargs)`` with the ``n`` columns of its operand ``args[at]`` (and of addmm's bias)
    padded with ``pad`` zero columns: the first ``n`` columns of the result, a view the caller copies to the
    declared layout. Each of them is the same dot product as the original's."""

    def widen(t):  # in the operand's own order (a transposed weight stays transposed: a coalesced copy)
        if t.dim() >= 2 and t.stride(-1) != 1 and t.stride(-2) == 1:
            out = t.new_zeros((*t.shape[:-2], n + pad, t.shape[-2])).transpose(-1, -2)
        else:
            out = t.new_zeros((*t.shape[:-1], n + pad))
        out[..., :n] = t
        return out

    args = list(args)
    args[at] = widen(args[at])
    if at == 2 and args[0].dim() > 0 and args[0].shape[-1] == n:
        args[0] = widen(args[0])
    return op(*args, **kwargs)[..., :n]


def _padded_columns(step: ir.ExternKernel, device) -> tuple[int, int] | None:
    """(columns, padding) of a half-precision (or TF32) product ``step`` whose result rows are not 16-byte
    aligned on a GPU, with rows enough for the slow kernel to cost more than the padding; else None.
    Measured on an H200 (``benchmarks/results/h200-2026-11-27``): GPT-2's head in bfloat16 5.24 -> 3.39 ms a
    call; in plain float32 padding only adds its copies (13.9 -> 14.3 ms), so it is not done there."""
    if step.op not in _PADDED or not _pads(device) or len(step.out_layouts) != 1:
        return None
    lay = step.out_layouts[0]
    if not (lay.dtype in (torch.float16, torch.bfloat16)
            or (lay.dtype == torch.float32 and torch.backends.cuda.matmul.allow_tf32)):
        return None  # plain float32 products do not use the tensor-core kernels that need the alignment
    item = lay.dtype.itemsize
    n = lay.size[-1] if len(lay.size) >= 2 else 0
    if not isinstance(n, int) or n == 0 or n * item % _PAD_BYTES == 0 or lay.size[-2] < _PAD_MIN_ROWS:
        return None
    return n, -(-n * item // _PAD_BYTES) * _PAD_BYTES // item - n


def _key(lay: ir.Layout) -> tuple:
    return (tuple(lay.size), tuple(lay.stride), lay.offset, lay.dtype)


def _reusable(sg: ir.ScheduledGraph) -> set[str]:
    """Buffers whose storage a later kernel output may take over once they are dead: kernel outputs (the
    wrapper allocated them, so they own their storage) read only by kernels. An extern op may return a view
    of what it reads, which would still be alive, so a buffer an extern op reads is never taken over."""
    owned, extern_read = set(), set()
    for step in sg.steps:
        if isinstance(step, ir.Kernel):
            owned.update(step.outputs)
        else:
            extern_read.update(step.input_names())
    return owned - extern_read


def build(sg: ir.ScheduledGraph, kernels: dict, constants: dict, device) -> tuple:
    """Returns (call, source). ``kernels``: name -> (fn, style) from a generator or the interpreter. The
    steps run once (``sg.once``) go into ``_once()``, which the first call runs; its result, the buffers the
    other steps read, is kept in ``_F``."""
    e = _Emitter(sg, kernels, constants, device)
    names = [i.name for i in sorted(sg.inputs, key=lambda i: i.index)]
    once = [(si, st) for si, st in enumerate(sg.steps) if st.name in sg.once]
    per_call = [(si, st) for si, st in enumerate(sg.steps) if st.name not in sg.once]
    kept = sg.kept() if once else []
    lines = []
    if once:
        lines.append("def _once(_empty):")
        e.steps(once, lines, keep=set(kept))
        lines.append(f"    return ({''.join(n + ', ' for n in kept)})")
        e.g["_F"] = []
    lines.append("def call(args):")
    if names:
        lines.append(f"    {', '.join(names)}{',' if len(names) == 1 else ''} = args")
    lines.append("    args.clear()")
    lines.extend(e.allocator())
    if once:
        lines.append("    if not _F: _F.append(_once(_empty))")
        if kept:
            lines.append(f"    {''.join(n + ', ' for n in kept)}= _F[0]")
    e.steps(per_call, lines, keep=set(names) | set(kept))
    outs = [e.ref(o) if isinstance(o, ir.TensorRef) else e.render(o) for o in sg.outputs]
    lines.append(f"    return ({''.join(o + ', ' for o in outs)})")
    src = "\n".join(lines) + "\n"
    exec(compile(src, "<mend-wrapper>", "exec"), e.g)
    call = e.g["call"]
    call._boxed_call = True
    return call, src


class _Emitter:
    """The wrapper's source, step by step: buffers allocated (or taken over from a dead buffer of the same
    layout), kernels launched, ATen ops called and their results bound, buffers freed after their last use."""

    def __init__(self, sg: ir.ScheduledGraph, kernels: dict, constants: dict, device) -> None:
        self.g: dict = {"_as": _as, "_restride": _restride, "_padded": _padded}
        self.g["_fast_empty"], self.g["_any_empty"] = _allocators(device)
        self.kernels = kernels
        self.device = device
        self.layouts: dict[str, ir.Layout] = {i.name: i.layout for i in sg.inputs}
        for c in sg.constants:
            self.g[c.name] = constants[c.name]
            self.layouts[c.name] = c.layout
        self.decl = {b.name: b.layout for b in sg.buffers}
        self.outputs = {o.buf for o in sg.outputs if isinstance(o, ir.TensorRef)}
        # an extern output that nothing reads is never bound
        self.read = set(self.outputs) | {n for st in sg.steps for n in ir.step_reads(st)}
        self.reusable = _reusable(sg)
        self.counter = 0

    def allocator(self) -> list[str]:
        """The lines that choose ``_empty`` for this call: the fast allocator where it allocates on the
        graph's device (the CPU; a GPU that is the current device), else the one that names the device."""
        dev = torch.device(self.device)
        if dev.type != "cuda" or self.g["_fast_empty"] is self.g["_any_empty"]:
            return ["    _empty = _fast_empty"]
        self.g["_getdev"] = getattr(torch._C, "_cuda_getDevice", torch.cuda.current_device)
        index = dev.index if dev.index is not None else torch.cuda.current_device()
        return [f"    _empty = _fast_empty if _getdev() == {index} else _any_empty"]

    def glob(self, obj) -> str:
        self.counter += 1
        name = f"_c{self.counter}"
        self.g[name] = obj
        return name

    def ref(self, r: ir.TensorRef) -> str:
        lay = self.layouts[r.buf]
        if r.layout.size == lay.size and r.layout.stride == lay.stride and r.layout.offset == lay.offset:
            return r.buf
        return f"_as({r.buf}, {r.layout.size!r}, {r.layout.stride!r}, {r.layout.offset - lay.offset})"

    def render(self, a) -> str:
        if isinstance(a, ir.TensorRef):
            return self.ref(a)
        if isinstance(a, list):
            return "[" + ", ".join(self.render(x) for x in a) + "]"
        if isinstance(a, tuple):
            return "(" + "".join(self.render(x) + ", " for x in a) + ")"
        if a is None or isinstance(a, (bool, int, str)):
            return repr(a)
        return self.glob(a)

    def steps(self, steps: list, lines: list, keep: set) -> None:
        """Emit ``steps`` ((index, step) pairs) into ``lines``, freeing each buffer after its last use among
        them, except those in ``keep`` (graph inputs; the buffers kept from the first call)."""
        last: dict[str, int] = {}
        for si, step in steps:
            for n in ir.step_reads(step) + ir.step_writes(step):
                last[n] = si
        frees: dict[int, list[str]] = {}
        for n, si in last.items():
            if n in self.read and n not in self.outputs and not n.startswith("const"):
                frees.setdefault(si, []).append(n)
        pool: dict[tuple, list[str]] = {}  # dead buffers a later kernel output of the same layout takes over
        for si, step in steps:
            if isinstance(step, ir.Kernel):
                self.kernel(step, lines, pool)
            else:
                self.extern(si, step, lines)
            for n in frees.get(si, []):
                if n in keep:
                    continue
                if n in self.reusable:
                    pool.setdefault(_key(self.decl[n]), []).append(n)
                else:
                    lines.append(f"    del {n}")
        for dead in pool.values():
            lines.extend(f"    del {n}" for n in dead)

    def kernel(self, step: ir.Kernel, lines: list, pool: dict) -> None:
        for o in step.outputs:
            lay = self.decl[o]
            self.layouts[o] = lay
            dead = pool.get(_key(lay))
            if dead:
                lines.append(f"    {o} = {dead[-1]}; del {dead.pop()}")
            else:
                lines.append(f"    {o} = _empty({lay.size!r}, {lay.stride!r}, {self.glob(lay.dtype)})")
        fn, style = self.kernels[step.name]
        self.g[step.name] = fn
        bufs = list(step.inputs) + list(step.outputs)
        if style == "ptr":
            lines.append(f"    {step.name}({', '.join(b + '.data_ptr()' for b in bufs)})")
        else:
            lines.append(f"    {step.name}({', '.join(bufs)})")

    def extern(self, si: int, step: ir.ExternKernel, lines: list) -> None:
        opn = self.glob(_DIRECT.get(step.op, step.op))
        args = ", ".join(self.render(a) for a in step.args)
        kw = "".join(f", {k}={self.render(v)}" for k, v in step.kwargs)
        if not args:
            kw = kw[2:]
        res = f"_r{si}"
        padded = _padded_columns(step, self.device)
        if padded is None:
            lines.append(f"    {res} = {opn}({args}{kw})")
        else:  # aligned columns; copied back to the declared layout below
            lines.append(f"    {res} = _padded({opn}, {_PADDED[step.op]}, {padded[0]}, {padded[1]}, {args}{kw})")
        flat_layouts = iter(step.out_layouts)

        def bind(o, expr):
            if o is None:
                return
            if isinstance(o, tuple):
                for i, x in enumerate(o):
                    bind(x, f"{expr}[{i}]")
                return
            lay = next(flat_layouts)
            self.layouts[o] = lay
            if o not in self.read:
                return
            lines.append(f"    {o} = {expr}")
            if len(lay.size) > 0:
                # an ATen op may return None where its meta function promised a tensor (on a GPU, the
                # flash-attention kernels' unused debug mask): nothing reads it then, as in eager
                lines.append(f"    if {o} is not None and {o}.stride() != {lay.stride!r}: "
                             f"{o} = _restride({o}, {lay.size!r}, {lay.stride!r})")

        bind(step.outputs, res)
        lines.append(f"    del {res}")
