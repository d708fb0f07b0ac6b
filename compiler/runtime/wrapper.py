"""The Python wrapper of a compiled graph: allocate buffers, call kernels and extern ATen ops, return
outputs. Generated as Python source (printable, dumped for debugging) and ``exec``-ed once."""

from __future__ import annotations

import torch

from .. import ir


def _as(t, size, stride, off):
    return t.as_strided(size, stride, t.storage_offset() + off)


def _restride(t, size, stride):
    out = torch.empty_strided(size, stride, dtype=t.dtype, device=t.device)
    out.copy_(t)
    return out


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
    """Returns (call, source). ``kernels``: name -> (fn, style) from a generator or the interpreter."""
    g: dict = {"_as": _as, "_restride": _restride, "_empty": torch.empty_strided, "_device": device}
    layouts: dict[str, ir.Layout] = {}
    lines = ["def call(args):"]
    n_in = len(sg.inputs)
    names = [i.name for i in sorted(sg.inputs, key=lambda i: i.index)]
    for i in sg.inputs:
        layouts[i.name] = i.layout
    if n_in:
        lines.append(f"    {', '.join(names)}{',' if n_in == 1 else ''} = args")
    lines.append("    args.clear()")
    for c in sg.constants:
        g[c.name] = constants[c.name]
        layouts[c.name] = c.layout
    decl = {b.name: b.layout for b in sg.buffers}
    counter = [0]

    def glob(obj) -> str:
        counter[0] += 1
        name = f"_c{counter[0]}"
        g[name] = obj
        return name

    def ref(r: ir.TensorRef) -> str:
        lay = layouts[r.buf]
        if r.layout.size == lay.size and r.layout.stride == lay.stride and r.layout.offset == lay.offset:
            return r.buf
        return f"_as({r.buf}, {r.layout.size!r}, {r.layout.stride!r}, {r.layout.offset - lay.offset})"

    def render(a) -> str:
        if isinstance(a, ir.TensorRef):
            return ref(a)
        if isinstance(a, list):
            return "[" + ", ".join(render(x) for x in a) + "]"
        if isinstance(a, tuple):
            return "(" + "".join(render(x) + ", " for x in a) + ")"
        if a is None or isinstance(a, (bool, int, str)):
            return repr(a)
        return glob(a)

    # last use of each buffer, to free early; an extern output that nothing reads is never bound
    out_bufs = {o.buf for o in sg.outputs if isinstance(o, ir.TensorRef)}
    read = set(out_bufs)
    last: dict[str, int] = {}
    for si, step in enumerate(sg.steps):
        reads = step.input_names() if isinstance(step, ir.ExternKernel) else list(step.inputs)
        read.update(reads)
        writes = step.output_names() if isinstance(step, ir.ExternKernel) else list(step.outputs)
        for n in reads + writes:
            last[n] = si
    frees: dict[int, list[str]] = {}
    for n, si in last.items():
        if n in read and n not in out_bufs and n not in names and not n.startswith("const"):
            frees.setdefault(si, []).append(n)
    reusable = _reusable(sg)
    pool: dict[tuple, list[str]] = {}  # dead buffers a later kernel output of the same layout takes over

    for si, step in enumerate(sg.steps):
        if isinstance(step, ir.Kernel):
            for o in step.outputs:
                lay = decl[o]
                layouts[o] = lay
                dead = pool.get(_key(lay))
                if dead:
                    lines.append(f"    {o} = {dead[-1]}; del {dead.pop()}")
                else:
                    lines.append(f"    {o} = _empty({lay.size!r}, {lay.stride!r}, dtype={glob(lay.dtype)}, device=_device)")
            fn, style = kernels[step.name]
            g[step.name] = fn
            bufs = list(step.inputs) + list(step.outputs)
            if style == "ptr":
                lines.append(f"    {step.name}({', '.join(b + '.data_ptr()' for b in bufs)})")
            else:
                lines.append(f"    {step.name}({', '.join(bufs)})")
        else:
            opn = glob(step.op)
            args = ", ".join(render(a) for a in step.args)
            kw = "".join(f", {k}={render(v)}" for k, v in step.kwargs)
            if not args:
                kw = kw[2:]
            res = f"_r{si}"
            lines.append(f"    {res} = {opn}({args}{kw})")
            flat_layouts = iter(step.out_layouts)

            def bind(o, expr, flat_layouts=flat_layouts):
                if o is None:
                    return
                if isinstance(o, tuple):
                    for i, x in enumerate(o):
                        bind(x, f"{expr}[{i}]")
                    return
                lay = next(flat_layouts)
                layouts[o] = lay
                if o not in read:
                    return
                lines.append(f"    {o} = {expr}")
                if len(lay.size) > 0:
                    # an ATen op may return None where its meta function promised a tensor (on a GPU, the
                    # flash-attention kernels' unused debug mask): nothing reads it then, as in eager
                    lines.append(f"    if {o} is not None and {o}.stride() != {lay.stride!r}: "
                                 f"{o} = _restride({o}, {lay.size!r}, {lay.stride!r})")

            bind(step.outputs, res)
            lines.append(f"    del {res}")
        for n in frees.get(si, []):
            if n in reusable:
                pool.setdefault(_key(decl[n]), []).append(n)
            else:
                lines.append(f"    del {n}")
    for dead in pool.values():
        lines.extend(f"    del {n}" for n in dead)
    outs = []
    for o in sg.outputs:
        outs.append(ref(o) if isinstance(o, ir.TensorRef) else render(o))
    lines.append(f"    return ({''.join(o + ', ' for o in outs)})")
    src = "\n".join(lines) + "\n"
    exec(compile(src, "<mend-wrapper>", "exec"), g)
    call = g["call"]
    call._boxed_call = True
    return call, src
