"""Triton template ``persistent``: a row kernel whose row fits in registers.

``RBLOCK = next_pow2(rnumel) <= PERSISTENT_RMAX``: a program handles ``XBLOCK`` rows as one
``[XBLOCK, RBLOCK]`` tile and computes every stage of the row group once. Pointwise stages stay in
registers, reductions use the builtin ``tl.sum``/``tl.max``/``tl.min``/``tl.argmax``/``tl.argmin`` (max/min
propagate NaN, argmax/argmin take the first NaN).
"""

from __future__ import annotations

import torch

from .... import ir
from ..emit import TL_TYPE, TritonEmitter, compute_dtype, highest, lowest, tl_compute


def render(src) -> str:
    lines = src.head(0, ["XBLOCK", "RBLOCK"])
    lines += [f"    rindex = {src.arange('RBLOCK')}[None, :]", "    rmask = rindex < rnumel"]
    return "\n".join(lines + _body(src)) + "\n"


def _body(src) -> list[str]:
    src.need_zero = False
    em = TritonEmitter(src, "    ")
    mask = "rmask"
    for st in src.k.stages:
        v = em.emit(st.expr)
        if st.kind == "pointwise":
            src.pw_values[st.name] = v
            if st.store is not None:
                src.store(em, st, v, row=False)
        elif st.kind == "reduction":
            r = _reduce_tile(src, em, st, v, mask, "rindex")
            src.row_values[st.name] = r
            if st.store is not None:
                src.store(em, st, r, row=True)
        elif st.kind == "outer":
            src.row_values[st.name] = v
            if st.store is not None:
                src.store(em, st, v, row=True)
        else:
            raise NotImplementedError(f"stage kind {st.kind}")
    return src.zeros() + em.lines


def _reduce_tile(src, em: TritonEmitter, st: ir.Stage, v: str, mask: str, index: str) -> str:
    """Reduce an (at most) [XBLOCK, RBLOCK] value along axis 1 -> [XBLOCK, 1] (persistent)."""
    kind = st.reduction
    vdt = compute_dtype(st.expr.dtype)
    out_ct = tl_compute(st.dtype)
    if kind == "sum":
        zero = "0" if not vdt.is_floating_point else "0.0"
        vv = v if vdt != torch.bool else em.tmp(f"{v}.to(tl.int32)")
        r = em.tmp(f"tl.sum(tl.where({mask}, {vv}, {zero}), 1)[:, None]")
        return em.tmp(f"{r}.to({out_ct})")
    if kind == "prod":
        one = "1.0" if vdt.is_floating_point else "1"
        vv = v if vdt != torch.bool else em.tmp(f"{v}.to(tl.int32)")
        r = em.tmp(f"tl.reduce(tl.where({mask}, {vv}, {one}), 1, _mul_combine)[:, None]")
        return em.tmp(f"{r}.to({out_ct})")
    if kind in ("any", "all"):
        b = em.tmp(f"({v} != 0).to(tl.int32)")
        if kind == "any":
            r = em.tmp(f"tl.max(tl.where({mask}, {b}, 0), 1)[:, None]")
        else:
            r = em.tmp(f"tl.min(tl.where({mask}, {b}, 1), 1)[:, None]")
        return em.tmp(f"({r} != 0)" if st.dtype == torch.bool else f"{r}.to({out_ct})")
    if kind in ("max", "min"):
        vv = v if vdt != torch.bool else em.tmp(f"{v}.to(tl.int32)")
        ident = lowest(vdt) if kind == "max" else highest(vdt)
        fn = "tl.max" if kind == "max" else "tl.min"
        if vdt.is_floating_point and src.nan_combine:
            comb = "_max_nan" if kind == "max" else "_min_nan"
            r = em.tmp(f"tl.reduce(tl.where({mask}, {vv}, {ident}), 1, {comb})[:, None]")
            return em.tmp(f"{r}.to({out_ct})")
        r = em.tmp(f"{fn}(tl.where({mask}, {vv}, {ident}), 1)[:, None]")
        if vdt.is_floating_point:
            nan = em.tmp(f"tl.max((({v} != {v}) & {mask}).to(tl.int32), 1)[:, None]")
            r = em.tmp(f"tl.where({nan} > 0, float(\"nan\"), {r})")
        return em.tmp(f"({r} != 0)" if st.dtype == torch.bool else f"{r}.to({out_ct})")
    if kind in ("argmax", "argmin"):
        vv = v if vdt != torch.bool else em.tmp(f"{v}.to(tl.int32)")
        ident = lowest(vdt) if kind == "argmax" else highest(vdt)
        fn = "tl.argmax" if kind == "argmax" else "tl.argmin"
        masked = em.tmp(f"tl.where({mask}, {vv}, {ident})")
        zt = TL_TYPE[vdt if vdt != torch.bool else torch.int32]
        masked = em.tmp(f"{masked} + tl.zeros([XBLOCK, RBLOCK], {zt})")
        r = em.tmp(f"{fn}({masked}, 1)[:, None].to(tl.int64)")
        if vdt.is_floating_point:
            # the first NaN wins (torch treats NaN as the extreme value)
            nidx = em.tmp(f"tl.min(tl.where(({v} != {v}) & {mask}, {index}, rnumel), 1)[:, None].to(tl.int64)")
            r = em.tmp(f"tl.where({nidx} < rnumel, {nidx}, {r})")
        return em.tmp(f"{r}.to({out_ct})")
    raise NotImplementedError(f"reduction {kind}")
