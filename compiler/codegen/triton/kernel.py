"""One :class:`mend.compiler.ir.Kernel` as ``@triton.jit`` source: :class:`KernelSource`.

A kernel source holds what its template (``templates/``, chosen by ``plan.py``) and its expression emitter
(``emit.py``) share: the plan, the parameter names, the index mapping onto ``xindex``/``rindex``, the
values of the stages computed so far, and the helpers every template uses (the function head, stores,
``outer`` stages). ``render()`` returns the text of the kernel's function(s); ``compile_units()`` and
``signature()`` are what the ahead-of-time compile workers need.

Anything the templates do not handle raises ``NotImplementedError``; the generator turns that into a
``KernelCompileError`` so the kernel runs in the reference interpreter instead.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from ... import ir
from ...ir.symbolic import simplify_index
from .emit import SIG_TYPE, TL_TYPE, TritonEmitter, print_index
from .plan import PERSISTENT_RMAX, SPLIT_MIN_RNUMEL, R, X, plan
from .reductions import acc_dtype
from .templates import looped, persistent, pointwise, split

TEMPLATES = {"pointwise": pointwise, "persistent": persistent, "looped": looped, "split": split}


@dataclass(frozen=True)
class _Index:
    text: str
    syms: frozenset  # subset of {X, R}


class KernelSource:
    """Triton source of one kernel; ``render()`` returns the text of the ``@triton.jit`` function(s)."""

    def __init__(self, kernel: ir.Kernel, persistent_rmax: int = PERSISTENT_RMAX,
                 split_min_rnumel: int = SPLIT_MIN_RNUMEL, nan_combine: bool = True):
        self.k = kernel
        # NaN-propagating max/min: one tl.reduce with a NaN-aware combine (as fast as tl.max on a GPU);
        # False: tl.max plus a NaN-flag reduction (builtin reductions only: 47x faster in the interpreter)
        self.nan_combine = nan_combine
        self.plan, self.mapping, self.ranges = plan(kernel, persistent_rmax, split_min_rnumel)
        self.ndim = 1 if self.plan.template == "pointwise" else 2
        self.fn_name = f"mend_{self.plan.template[:3]}_{kernel.name}"
        # split template: a partial-reduction kernel and a combine kernel, with workspace buffers
        self.fn_names = [self.fn_name] if self.plan.template != "split" else [
            f"{self.fn_name}_part", f"{self.fn_name}_done"]
        self.workspaces: list[tuple[str, torch.dtype]] = []  # (param name, dtype), split template only
        self.ptr = {}
        for i, b in enumerate(kernel.inputs):
            self.ptr[b] = f"in_ptr{i}"
        for i, b in enumerate(kernel.outputs):
            self.ptr[b] = f"out_ptr{i}"
        self.params = [self.ptr[b] for b in list(kernel.inputs) + list(kernel.outputs)]
        if self.plan.template == "split":
            for j, st in enumerate(s for s in kernel.stages if s.kind == "reduction"):
                self.workspaces.append((f"ws{j}", acc_dtype(st)))
                if st.reduction in ("argmax", "argmin"):
                    self.workspaces.append((f"wsi{j}", torch.int64))
        self.stage = {s.name: s for s in kernel.stages}
        self.row_values: dict[str, str] = {}  # reduction/outer stage -> [XBLOCK, 1] value
        self.pw_values: dict[str, str] = {}  # persistent: pointwise stage -> tile value
        self.need_zero = False  # a store index constant along an axis was broadened (see :meth:`zeros`)
        self.n = 0
        self._text = None

    # ------------------------------------------------------------------ what the emitter asks for
    def fresh(self) -> str:
        self.n += 1
        return f"tmp{self.n}"

    def index(self, e) -> _Index:
        ex = simplify_index(e.xreplace(self.mapping), self.ranges)
        syms = frozenset(ex.free_symbols)
        if syms - {X, R}:
            raise NotImplementedError(f"index {e} has unknown symbols")
        return _Index(print_index(ex), syms)

    def mask_for(self, idx: _Index) -> str:
        if self.ndim == 1:
            return "xmask" if X in idx.syms else ""
        parts = []
        if X in idx.syms:
            parts.append("xmask")
        if R in idx.syms:
            parts.append("rmask")
        return " & ".join(parts)

    def local_value(self, e: ir.Local, em: TritonEmitter) -> str:
        st = self.stage.get(e.name)
        if st is None:
            raise NotImplementedError(f"local {e.name} has no producer stage")
        if st.kind != "pointwise":
            return self.row_values[st.name]
        if self.plan.template == "looped":
            # recompute the row stage at this chunk
            return em.emit(st.expr)
        return self.pw_values[st.name]

    # ----------------------------------------------------------------- what the compile workers need
    def compile_units(self) -> list:
        """[(function name, signature, [(constexprs, num_warps) per launch configuration])]: everything
        needed to compile the kernel's functions ahead of time."""
        p = self.plan
        base = self.signature()
        if p.template != "split":
            return [(self.fn_name, base, [(c.constexprs(p.template), c.num_warps) for c in p.configs])]
        sig = {k: v for k, v in base.items() if v != "constexpr"}
        for name, dt in self.workspaces:
            sig[name] = "*" + SIG_TYPE[dt]
        part = dict(sig, XBLOCK="constexpr", RBLOCK="constexpr")
        done = dict(sig, XBLOCK="constexpr", SBLOCK="constexpr")
        d = p.done_config
        return [(self.fn_names[0], part, [(c.constexprs("looped"), c.num_warps) for c in p.configs]),
                (self.fn_names[1], done, [({"XBLOCK": d.XBLOCK, "SBLOCK": d.RBLOCK}, d.num_warps)])]

    def signature(self) -> dict:
        sig = {p: "*" + SIG_TYPE[self.k.dtype_of(b)]
               for p, b in zip(self.params, list(self.k.inputs) + list(self.k.outputs))}
        sig["XBLOCK"] = "constexpr"
        if self.plan.template != "pointwise":
            sig["RBLOCK"] = "constexpr"
        return sig

    # ------------------------------------------------------------------------------- rendering
    def render(self) -> str:
        if self._text is None:
            self.row_values, self.pw_values, self.n = {}, {}, 0
            self._text = TEMPLATES[self.plan.template].render(self)
        return self._text

    def program_id(self, axis: int) -> str:
        pid = f"tl.program_id({axis})"
        return pid if self.plan.index_dtype == "tl.int32" else f"{pid}.to(tl.int64)"

    def arange(self, block: str) -> str:
        ar = f"tl.arange(0, {block})"
        return ar if self.plan.index_dtype == "tl.int32" else f"{ar}.to(tl.int64)"

    def head(self, name: str, constexprs: list[str]) -> list[str]:
        """A function's decorator, signature (pointers, workspaces, ``constexprs``) and row setup:
        ``xindex`` (a block of elements, or of rows as an ``[XBLOCK, 1]`` column), ``xmask``, ``rnumel``."""
        params = self.params + [w for w, _ in self.workspaces] + [f"{c}: tl.constexpr" for c in constexprs]
        lines = [
            "@triton.jit",
            f"def {name}({', '.join(params)}):",
            f"    xnumel = {self.plan.xnumel}",
            f"    xoffset = {self.program_id(0)} * XBLOCK",
        ]
        if self.ndim == 1:
            return lines + [f"    xindex = xoffset + {self.arange('XBLOCK')}", "    xmask = xindex < xnumel"]
        return lines + [f"    xindex = xoffset + {self.arange('XBLOCK')}[:, None]", "    xmask = xindex < xnumel",
                        f"    rnumel = {self.plan.rnumel}"]

    def store(self, em: TritonEmitter, st: ir.Stage, value: str, row: bool) -> None:
        """Store stage ``st``'s ``value``: a tile value, or with ``row`` one value per row."""
        idx = self.index(st.store_index)
        text = idx.text
        # a store index must have the tile's shape even where it is constant along an axis
        if X not in idx.syms:
            text = f"{text} + xzero" if self.ndim == 1 else f"{text} + xzero2"
            self.need_zero = True
        if self.ndim == 2 and not row and R not in idx.syms:
            text = f"{text} + rzero"
            self.need_zero = True
        mask = "xmask" if (self.ndim == 1 or row) else "xmask & rmask"
        v = value
        if st.dtype != torch.bool:
            v = f"{value}.to({TL_TYPE[st.dtype]})"
        em.line(f"tl.store({self.ptr[st.name]} + {text}, {v}, {mask})")

    def zeros(self, rblock: str = "RBLOCK") -> list[str]:
        """The zero index tiles a broadened store adds (when :attr:`need_zero`)."""
        if not self.need_zero:
            return []
        it = self.plan.index_dtype
        if self.ndim == 1:
            return [f"    xzero = tl.zeros([XBLOCK], {it})"]
        return [f"    xzero2 = tl.zeros([XBLOCK, 1], {it})", f"    rzero = tl.zeros([1, {rblock}], {it})"]

    def outer(self, em: TritonEmitter, st: ir.Stage) -> None:
        """An ``outer`` stage: one value per row, stored when it leaves the kernel."""
        v = em.emit(st.expr)
        self.row_values[st.name] = v
        if st.store is not None:
            self.store(em, st, v, row=True)
