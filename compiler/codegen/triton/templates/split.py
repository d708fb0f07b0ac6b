"""Triton template ``split``: few, very long rows (a reduction to a handful of values).

One program per row would leave most of the GPU idle, so each row is cut into ``nsplit`` chunks of
``rchunk`` elements. Two functions: ``<name>_part`` (grid: row blocks x ``nsplit``) reduces its chunk of
each row into workspace slot ``[split, row]`` and does the row's pointwise stores; ``<name>_done`` (grid:
row blocks) combines the ``nsplit`` partials of each row with the builtin reductions, then computes and
stores the per-row ``outer`` stages. Only kernels with one pass of independent reductions are split
(``plan.py``).
"""

from __future__ import annotations

from .... import ir
from ..emit import TL_TYPE, TritonEmitter
from ..reductions import acc_dtype, acc_finish, acc_init, acc_update, identity, lane_reduce


def render(src) -> str:
    """Two functions. ``_part`` (grid: row blocks x nsplit) reduces chunk ``program_id(1)`` of each
    row into workspace slot ``[split, row]`` (and does the row's pointwise stores); ``_done`` (grid: row
    blocks) combines the ``nsplit`` partials of each row with the builtin reductions, then computes and
    stores the per-row epilogue stages."""
    p = src.plan
    reds = [st for st in src.k.stages if st.kind == "reduction"]
    ws = {}
    j = 0
    for st in reds:
        ws[st.name] = (f"ws{j}", f"wsi{j}" if st.reduction in ("argmax", "argmin") else None)
        j += 1
    # ---- part
    src.need_zero = False
    top = TritonEmitter(src, "    ")
    accs = {st.name: acc_init(src, top, st) for st in reds}
    rar = src.arange("RBLOCK")
    sid = src.program_id(1)
    top.line(f"rbase = {rar}[None, :]")
    top.line(f"rstart = {sid} * {p.rchunk}")
    top.line(f"for roffset in range(rstart, rstart + {p.rchunk}, RBLOCK):")
    em = TritonEmitter(src, "        ", parent=top)
    em.line("rindex = roffset + rbase")
    em.line("rmask = rindex < rnumel")
    for st in reds:
        acc_update(src, em, st, em.emit(st.expr), accs[st.name])
    for st in src.k.stages:
        if st.kind == "pointwise" and st.store is not None:
            src.store(em, st, em.emit(st.expr), row=False)
    top.lines += em.lines
    for st in reds:
        val, idx = _partial_finish(src, top, st, accs[st.name])
        wv, wi = ws[st.name]
        top.line(f"tl.store({wv} + {sid} * xnumel + xindex, {val}, xmask)")
        if wi is not None:
            top.line(f"tl.store({wi} + {sid} * xnumel + xindex, {idx}, xmask)")
    part = src.head(0, ["XBLOCK", "RBLOCK"])
    part += src.zeros() + top.lines
    # ---- done
    src.need_zero = False
    src.row_values = {}
    top = TritonEmitter(src, "    ")
    sar = src.arange("SBLOCK")
    top.line(f"sindex = {sar}[None, :]")
    top.line(f"smask = sindex < {p.nsplit}")
    for st in reds:
        wv, wi = ws[st.name]
        vdt = acc_dtype(st)
        ident = identity(st.reduction, vdt)
        a = {"acc": src.fresh(), "dtype": vdt}
        top.line(f"{a['acc']} = tl.load({wv} + sindex * xnumel + xindex, xmask & smask, other={ident})")
        if wi is not None:
            a["idx"] = src.fresh()
            top.line(f"{a['idx']} = tl.load({wi} + sindex * xnumel + xindex, xmask & smask, other=rnumel)")
        if st.reduction in ("max", "min") and vdt.is_floating_point and not src.nan_combine:
            a["nan"] = src.fresh()
            top.line(f"{a['nan']} = ({a['acc']} != {a['acc']}).to(tl.int32)")
        r = acc_finish(src, top, st, a)
        src.row_values[st.name] = r
        if st.store is not None:
            src.store(top, st, r, row=True)
    for st in src.k.stages:
        if st.kind == "outer":
            src.outer(top, st)
    done = src.head(1, ["XBLOCK", "SBLOCK"])
    done += src.zeros("SBLOCK") + top.lines
    return "\n".join(part) + "\n\n\n" + "\n".join(done) + "\n"


def _partial_finish(src, em: TritonEmitter, st: ir.Stage, a: dict):
    """A chunk's partial result per row ([XBLOCK, 1] value, and index for argmax/argmin)."""
    r, i = lane_reduce(src, em, st.reduction, a)
    if i is not None:
        return r, i
    return em.tmp(f"{r}.to({TL_TYPE[a['dtype']]})"), None
