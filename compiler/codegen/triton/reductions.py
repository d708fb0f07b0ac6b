"""Row accumulators of the ``looped`` and ``split`` templates.

A reduction stage walked in chunks keeps an ``[XBLOCK, RBLOCK]`` accumulator per row (:func:`acc_init`),
folds each chunk into it lane by lane (:func:`acc_update`), and reduces the lanes at the end
(:func:`acc_finish`, through :func:`lane_reduce`). Max/min propagate NaN either through a NaN-aware combine
(``src.nan_combine``) or through a NaN flag per lane; argmax/argmin keep the smallest index of the extreme
value (NaN counts as the extreme, as in torch). bool values and any/all accumulate in int32. ``src`` is the
kernel's :class:`~mend.compiler.codegen.triton.kernel.KernelSource`.
"""

from __future__ import annotations

import torch

from ... import ir
from .emit import TL_TYPE, TritonEmitter, compute_dtype, highest, lowest, tl_compute


def acc_dtype(st: ir.Stage) -> torch.dtype:
    """The accumulator dtype of a reduction stage (bool and any/all accumulate in int32)."""
    vdt = compute_dtype(st.expr.dtype)
    if vdt == torch.bool or st.reduction in ("any", "all"):
        return torch.int32
    return vdt


def identity(kind: str, vdt: torch.dtype) -> str:
    """The value a ``kind`` reduction over ``vdt`` accumulators starts from (and pads with)."""
    init = {"sum": "0", "prod": "1", "any": "0", "all": "1"}.get(kind)
    if init is None:
        init = lowest(vdt) if kind in ("max", "argmax") else highest(vdt)
    return init


def acc_init(src, em: TritonEmitter, st: ir.Stage) -> dict:
    kind = st.reduction
    vdt = acc_dtype(st)
    t = TL_TYPE[vdt]
    acc = src.fresh()
    shape = "[XBLOCK, RBLOCK]"
    em.line(f"{acc} = tl.full({shape}, {identity(kind, vdt)}, {t})")
    out = {"acc": acc, "dtype": vdt}
    if kind in ("argmax", "argmin"):
        idx = src.fresh()
        em.line(f"{idx} = tl.full({shape}, rnumel, {src.plan.index_dtype})")
        out["idx"] = idx
    if kind in ("max", "min") and vdt.is_floating_point and not src.nan_combine:
        nan = src.fresh()
        em.line(f"{nan} = tl.zeros({shape}, tl.int32)")
        out["nan"] = nan
    return out


def acc_update(src, em: TritonEmitter, st: ir.Stage, v: str, a: dict) -> None:
    kind = st.reduction
    acc = a["acc"]
    vdt = a["dtype"]
    t = TL_TYPE[vdt]
    mask = "rmask"
    if kind in ("any", "all"):
        v = em.tmp(f"({v} != 0).to(tl.int32)")
    elif compute_dtype(st.expr.dtype) == torch.bool:
        v = em.tmp(f"{v}.to(tl.int32)")
    if kind == "sum":
        em.line(f"{acc} = {acc} + tl.where({mask}, {v}, 0).to({t})")
    elif kind == "prod":
        em.line(f"{acc} = {acc} * tl.where({mask}, {v}, 1).to({t})")
    elif kind == "any":
        em.line(f"{acc} = tl.maximum({acc}, tl.where({mask}, {v}, 0))")
    elif kind == "all":
        em.line(f"{acc} = tl.minimum({acc}, tl.where({mask}, {v}, 1))")
    elif kind in ("max", "min"):
        ident = lowest(vdt) if kind == "max" else highest(vdt)
        fn = "tl.maximum" if kind == "max" else "tl.minimum"
        nanarg = ", propagate_nan=tl.PropagateNan.ALL" if vdt.is_floating_point and src.nan_combine else ""
        em.line(f"{acc} = {fn}({acc}, tl.where({mask}, {v}, {ident}).to({t}){nanarg})")
        if "nan" in a:
            em.line(f"{a['nan']} = {a['nan']} | ((({v} != {v}) & {mask}).to(tl.int32))")
    elif kind in ("argmax", "argmin"):
        ident = lowest(vdt) if kind == "argmax" else highest(vdt)
        cmp = ">" if kind == "argmax" else "<"
        vm = em.tmp(f"tl.where({mask}, {v}, {ident}).to({t})")
        take = f"({vm} {cmp} {acc})"
        if vdt.is_floating_point:
            take = f"({take} | (({vm} != {vm}) & ({acc} == {acc})))"
        idx = a["idx"]
        tk = em.tmp(f"{mask} & ({take} | ({idx} == rnumel))")
        em.line(f"{acc} = tl.where({tk}, {vm}, {acc})")
        em.line(f"{idx} = tl.where({tk}, rindex + tl.zeros([XBLOCK, RBLOCK], {src.plan.index_dtype}), {idx})")
    else:
        raise NotImplementedError(f"reduction {kind}")


def acc_finish(src, em: TritonEmitter, st: ir.Stage, a: dict) -> str:
    out_ct = tl_compute(st.dtype)
    r, i = lane_reduce(src, em, st.reduction, a)
    if i is not None:
        return em.tmp(f"{i}.to({out_ct})")
    if st.dtype == torch.bool:
        return em.tmp(f"({r} != 0)")
    return em.tmp(f"{r}.to({out_ct})")


def lane_reduce(src, em: TritonEmitter, kind: str, a: dict) -> tuple[str, str | None]:
    """Reduce an ``[XBLOCK, RBLOCK]`` accumulator over its lanes to ``[XBLOCK, 1]``.

    Returns ``(value, index)``: for argmax/argmin the extreme value (NaN when a lane holds NaN) and the
    smallest index holding it; for the other reductions the value (NaN-propagated through the
    accumulator's NaN flag, when it has one) and None.
    """
    acc, vdt = a["acc"], a["dtype"]
    if kind in ("argmax", "argmin"):
        ident = lowest(vdt) if kind == "argmax" else highest(vdt)
        fn = "tl.max" if kind == "argmax" else "tl.min"
        idx = a["idx"]
        if vdt.is_floating_point:
            isn = em.tmp(f"{acc} != {acc}")
            hasn = em.tmp(f"tl.max({isn}.to(tl.int32), 1)[:, None] > 0")
            m = em.tmp(f"{fn}(tl.where({isn}, {ident}, {acc}), 1)[:, None]")
            target = em.tmp(f"tl.where({hasn}, {isn}, {acc} == {m})")
            m = em.tmp(f"tl.where({hasn}, float(\"nan\"), {m})")
        else:
            m = em.tmp(f"{fn}({acc}, 1)[:, None]")
            target = em.tmp(f"{acc} == {m}")
        i = em.tmp(f"tl.min(tl.where({target}, {idx}, rnumel), 1)[:, None].to(tl.int64)")
        return m, i
    if kind == "sum":
        r = em.tmp(f"tl.sum({acc}, 1)[:, None]")
    elif kind == "prod":
        r = em.tmp(f"tl.reduce({acc}, 1, _mul_combine)[:, None]")
    elif kind in ("max", "min") and vdt.is_floating_point and src.nan_combine:
        r = em.tmp(f"tl.reduce({acc}, 1, {'_max_nan' if kind == 'max' else '_min_nan'})[:, None]")
    elif kind in ("any", "max"):
        r = em.tmp(f"tl.max({acc}, 1)[:, None]")
    elif kind in ("all", "min"):
        r = em.tmp(f"tl.min({acc}, 1)[:, None]")
    else:
        raise NotImplementedError(f"reduction {kind}")
    if "nan" in a:
        hasn = em.tmp(f"tl.max({a['nan']}, 1)[:, None]")
        r = em.tmp(f"tl.where({hasn} > 0, float(\"nan\"), {r})")
    return r, None
