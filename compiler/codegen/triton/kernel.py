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

import hashlib
from dataclasses import dataclass

import torch

from ... import ir
from ...ir.symbolic import simplify_index
from .emit import SIG_TYPE, TL_TYPE, TritonEmitter, print_index
from .plan import PERSISTENT_RMAX, SPLIT_MIN_RNUMEL, Config, R, X, plan
from .reductions import acc_dtype
from .templates import looped, matmul, persistent, pointwise, split

NAME_SLOT = "KERNEL_NAME_SLOT"  # in the function names while a template renders
TEMPLATES = {"pointwise": pointwise, "persistent": persistent, "looped": looped, "split": split, "matmul": matmul}


@dataclass(frozen=True)
class _Index:
    text: str
    syms: frozenset  # the index symbols it uses (X, R; the matmul template's rm, rn, rb)


class KernelSource:
    """Triton source of one kernel; ``render()`` returns the text of the ``@triton.jit`` function(s)."""

    def __init__(self, kernel: ir.Kernel, persistent_rmax: int = PERSISTENT_RMAX,
                 split_min_rnumel: int = SPLIT_MIN_RNUMEL, nan_combine: bool = True, native_dot: bool = True):
        self.k = kernel
        # NaN-propagating max/min: one tl.reduce with a NaN-aware combine (as fast as tl.max on a GPU);
        # False: tl.max plus a NaN-flag reduction (builtin reductions only: 47x faster in the interpreter)
        self.nan_combine = nan_combine
        # tl.dot on half-precision tiles (tensor cores); False: on float32 copies (Triton's interpreter
        # multiplies bfloat16 tiles wrong)
        self.native_dot = native_dot
        self.plan, self.mapping, self.ranges = plan(kernel, persistent_rmax, split_min_rnumel)
        self.masks = {X: "xmask", R: "rmask"}  # index symbol -> its mask (None: never out of range)
        if self.plan.template == "matmul":
            self.mapping, self.ranges, self.masks = matmul.symbols(kernel, self.plan.mm)
        self.ndim = 1 if self.plan.template == "pointwise" else 2
        # function names are set when rendering: the template's, then a digest of the text (see render())
        base = f"mend_{self.plan.template[:3]}_{NAME_SLOT}"
        # split template: a partial-reduction kernel and a combine kernel, with workspace buffers
        self._names = [base] if self.plan.template != "split" else [f"{base}_part", f"{base}_done"]
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
        # matmul template: the epilogue alone, after a cuBLAS product (the launcher keeps the faster)
        self.epilogue = None
        if self.plan.template == "matmul":
            self.epilogue = KernelSource(matmul.epilogue_kernel(kernel, self.plan.mm), persistent_rmax,
                                         split_min_rnumel, nan_combine, native_dot)
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
        if syms - set(self.masks):
            raise NotImplementedError(f"index {e} has unknown symbols")
        return _Index(print_index(ex), syms)

    def mask_for(self, idx: _Index) -> str:
        return " & ".join(m for s, m in self.masks.items() if s in idx.syms and m)

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
        if p.template == "matmul":
            return [(self.fn_name, base, [(c.constexprs(p.template), c.options()) for c in p.configs]),
                    *self.epilogue.compile_units()]
        if p.template != "split":
            return [(self.fn_name, base, [(c.constexprs(p.template), c.options()) for c in p.configs])]
        sig = {k: v for k, v in base.items() if v != "constexpr"}
        for name, dt in self.workspaces:
            sig[name] = "*" + SIG_TYPE[dt]
        part = dict(sig, XBLOCK="constexpr", RBLOCK="constexpr")
        done = dict(sig, XBLOCK="constexpr", SBLOCK="constexpr")
        d = p.done_config
        return [(self.fn_names[0], part, [(c.constexprs("looped"), c.options()) for c in p.configs]),
                (self.fn_names[1], done, [({"XBLOCK": d.XBLOCK, "SBLOCK": d.RBLOCK}, d.options())])]

    def signature(self) -> dict:
        sig = {p: "*" + SIG_TYPE[self.k.dtype_of(b)]
               for p, b in zip(self.params, list(self.k.inputs) + list(self.k.outputs))}
        for c in Config(1).constexprs(self.plan.template):
            sig[c] = "constexpr"
        return sig

    # ------------------------------------------------------------------------------- rendering
    def render(self) -> str:
        """The kernel's function(s). Their names end in a digest of the text: kernels that render alike
        (the same layer's kernels, four layers deep) share one name, so one compile serves them all."""
        if self._text is None:
            self.row_values, self.pw_values, self.n = {}, {}, 0
            text = TEMPLATES[self.plan.template].render(self)
            if self.epilogue is not None:
                text += "\n\n" + self.epilogue.render()
            digest = hashlib.sha256(text.encode()).hexdigest()[:16]
            self._names = [n.replace(NAME_SLOT, digest) for n in self._names]
            self._text = text.replace(NAME_SLOT, digest)
        return self._text

    @property
    def fn_names(self) -> list[str]:
        self.render()
        return list(self._names)

    @property
    def fn_name(self) -> str:
        return self.fn_names[0]

    def program_id(self, axis: int) -> str:
        pid = f"tl.program_id({axis})"
        return pid if self.plan.index_dtype == "tl.int32" else f"{pid}.to(tl.int64)"

    def arange(self, block: str) -> str:
        ar = f"tl.arange(0, {block})"
        return ar if self.plan.index_dtype == "tl.int32" else f"{ar}.to(tl.int64)"

    def head(self, fn: int, constexprs: list[str], rows: bool = True) -> list[str]:
        """Function ``fn``'s decorator, signature (pointers, workspaces, ``constexprs``) and, with ``rows``,
        row setup: ``xindex`` (a block of elements, or of rows as an ``[XBLOCK, 1]`` column), ``xmask``,
        ``rnumel``."""
        name = self._names[fn]
        params = self.params + [w for w, _ in self.workspaces] + [f"{c}: tl.constexpr" for c in constexprs]
        lines = ["@triton.jit", f"def {name}({', '.join(params)}):"]
        if not rows:
            return lines
        lines += [
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
        if self.plan.template == "matmul":  # [BLOCK_M, BLOCK_N] tiles
            if not {matmul.RM, matmul.RN} <= idx.syms:
                text = f"{text} + mnzero"
                self.need_zero = True
            v = value if st.dtype == torch.bool else f"{value}.to({TL_TYPE[st.dtype]})"
            em.line(f"tl.store({self.ptr[st.name]} + {text}, {v}, mmask & nmask)")
            return
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
