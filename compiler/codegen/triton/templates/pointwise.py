"""Triton template ``pointwise``: a kernel without reduced dims.

Its iteration space is coalesced (``codegen/common.py``) and walked as one flat index ``xindex`` in blocks
of ``XBLOCK`` (1-D, masked by ``xindex < xnumel``); every stage is computed at the same element.
"""

from __future__ import annotations

from ..emit import TritonEmitter


def render(src) -> str:
    lines = src.head(0, ["XBLOCK"]) + _body(src)
    return "\n".join(lines) + "\n"


def _body(src) -> list[str]:
    src.need_zero = False
    em = TritonEmitter(src, "    ")
    for st in src.k.stages:
        if st.kind != "pointwise":
            raise NotImplementedError(f"stage kind {st.kind} in a pointwise kernel")
        v = em.emit(st.expr)
        src.pw_values[st.name] = v
        if st.store is not None:
            src.store(em, st, v, row=False)
    return src.zeros() + em.lines
