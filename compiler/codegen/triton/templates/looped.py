"""Triton template ``looped``: long rows (or reductions over non-contiguous dims).

The row is walked in chunks of ``RBLOCK`` with vector accumulators (``reductions.py``), one loop per
dependency level of the reductions (softmax: one loop for the max, one for the sum, one for the stores).
Pointwise stages are recomputed in every loop that needs them instead of being kept in registers.
"""

from __future__ import annotations

from ..emit import TritonEmitter
from ..plan import levels
from ..reductions import acc_finish, acc_init, acc_update


def render(src) -> str:
    lines = src.head(0, ["XBLOCK", "RBLOCK"])
    lines += [f"    rbase = {src.arange('RBLOCK')}[None, :]"]
    return "\n".join(lines + _body(src)) + "\n"


def _body(src) -> list[str]:
    src.need_zero = False
    avail = levels(src.k)
    stages = src.k.stages
    n_loops = 0
    for st in stages:
        if st.kind == "reduction":
            n_loops = max(n_loops, avail[st.name])
        elif st.kind == "pointwise" and st.store is not None:
            n_loops = max(n_loops, avail[st.name] + 1)
    top = TritonEmitter(src, "    ")
    for level in range(n_loops):
        # row values that are ready before this loop
        for st in stages:
            if st.kind == "outer" and avail[st.name] == level:
                src.outer(top, st)
        reds = [st for st in stages if st.kind == "reduction" and avail[st.name] == level + 1]
        stores = [st for st in stages if st.kind == "pointwise" and st.store is not None
                  and avail[st.name] == level]
        if not reds and not stores:
            continue
        accs = {}
        for st in reds:
            accs[st.name] = acc_init(src, top, st)
        top.line("for roffset in range(0, rnumel, RBLOCK):")
        em = TritonEmitter(src, "        ", parent=top)
        em.line("rindex = roffset + rbase")
        em.line("rmask = rindex < rnumel")
        for st in reds:
            v = em.emit(st.expr)
            acc_update(src, em, st, v, accs[st.name])
        for st in stores:
            v = em.emit(st.expr)
            src.store(em, st, v, row=False)
        top.lines += em.lines
        for st in reds:
            r = acc_finish(src, top, st, accs[st.name])
            src.row_values[st.name] = r
            if st.store is not None:
                src.store(top, st, r, row=True)
    for st in stages:
        if st.kind == "outer" and avail[st.name] >= n_loops and st.name not in src.row_values:
            src.outer(top, st)
    return src.zeros() + top.lines
