"""Planning a Triton kernel: its template, launch configurations and index width.

Templates (``templates/``):

* ``pointwise``: a kernel without reduced dims. Its iteration space is coalesced (``codegen/common.py``)
  and walked as one flat index ``xindex`` in blocks of ``XBLOCK`` (1-D, masked by ``xindex < xnumel``).
* ``persistent``: a row kernel (``rdims`` non-empty) whose row fits in registers
  (``RBLOCK = next_pow2(rnumel) <= PERSISTENT_RMAX``): a program handles ``XBLOCK`` rows as an
  ``[XBLOCK, RBLOCK]`` tile.
* ``looped``: long rows (or reductions over non-contiguous dims), walked in chunks of ``RBLOCK``.
* ``split``: few, very long rows: partial reductions over a 2-D grid into workspaces, then a combine kernel.
* ``matmul``: a matrix product (``ir/contraction.py``) and its per-row epilogue: ``tl.dot`` over
  ``BLOCK_M x BLOCK_N`` output tiles, the epilogue applied to each tile in registers.

Index expressions are rewritten from the kernel's ``x0..xn`` over the flat ``xindex`` (row number or
element number) and ``rindex`` (position in the row, row-major over ``rdims``). Indices are int32 unless an
index can reach ``2**31`` (then int64). Configurations are listed best guess first; kernels with several
are autotuned once at their first launch (``launch.py``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import sympy
import torch

from ... import ir
from ...ir.contraction import Contraction, of_stage
from ...ir.symbolic import FloorDiv, IMod, bounds, simplify_index, variables
from ..common import coalesce
from .emit import compute_dtype

PERSISTENT_RMAX = 4096  # longest row kept in registers
TILE_MAX = 8192  # XBLOCK * RBLOCK of a persistent reduction
INT32_LIMIT = 2**31 - 1

X = sympy.Symbol("xindex", integer=True, nonnegative=True)
R = sympy.Symbol("rindex", integer=True, nonnegative=True)


def next_pow2(n: int) -> int:
    return 1 if n <= 1 else 1 << (int(n) - 1).bit_length()


@dataclass(frozen=True)
class Config:
    XBLOCK: int  # matmul: BLOCK_M
    RBLOCK: int = 1  # matmul: BLOCK_K
    num_warps: int = 4
    YBLOCK: int = 1  # matmul: BLOCK_N
    num_stages: int = 0  # software pipelining depth (0: Triton's default)

    def constexprs(self, template: str) -> dict:
        if template == "pointwise":
            return {"XBLOCK": self.XBLOCK}
        if template == "matmul":
            return {"BLOCK_M": self.XBLOCK, "BLOCK_N": self.YBLOCK, "BLOCK_K": self.RBLOCK}
        return {"XBLOCK": self.XBLOCK, "RBLOCK": self.RBLOCK}

    def options(self) -> dict:
        """Compile options: ``num_warps``, and ``num_stages`` where set."""
        return {"num_warps": self.num_warps, **({"num_stages": self.num_stages} if self.num_stages else {})}

    def key(self) -> list:
        """What an autotune record stores to name this configuration."""
        k = [self.XBLOCK, self.RBLOCK, self.num_warps]
        return k + [self.YBLOCK, self.num_stages] if (self.YBLOCK, self.num_stages) != (1, 0) else k


@dataclass(frozen=True)
class Plan:
    template: str  # pointwise | persistent | looped
    xnumel: int
    rnumel: int
    index_dtype: str  # tl.int32 | tl.int64
    configs: tuple  # Config, best guess first
    outer_reduction: bool = False  # the reduced dims are not the contiguous ones
    nsplit: int = 1  # split template: programs per row (partial reductions), then a combine kernel
    rchunk: int = 0  # split template: reduction elements per partial
    done_config: "Config | None" = None  # split template: the combine kernel (XBLOCK rows, RBLOCK=SBLOCK)
    mm: "Contraction | None" = None  # matmul template: the product (sizes, operands)

    def programs(self, cfg: Config) -> int:
        """Programs of one launch with ``cfg`` (the first grid axis; a matmul's batch is the second)."""
        if self.template == "matmul":
            return -(-self.mm.m // cfg.XBLOCK) * -(-self.mm.n // cfg.YBLOCK)
        return -(-self.xnumel // cfg.XBLOCK)

    def grid(self, cfg: Config) -> tuple:
        if self.template == "matmul":
            return (self.programs(cfg), math.prod(self.mm.batch))
        return (self.programs(cfg),)


def _warps(elements: int, lo: int = 1, hi: int = 8) -> int:
    w = max(lo, min(hi, elements // 256))
    return 1 << (w.bit_length() - 1)


def _pointwise_configs(n: int) -> tuple:
    if n <= 1024:
        xb = max(16, next_pow2(n))
        return (Config(xb, 1, _warps(xb, 1, 4)),)
    if n < 2**18:
        return (Config(1024, 1, 4), Config(512, 1, 4))
    return (Config(1024, 1, 4), Config(2048, 1, 8), Config(512, 1, 4))


def _persistent_configs(xnumel: int, rnumel: int) -> tuple:
    rb = next_pow2(rnumel)
    cap = max(1, TILE_MAX // rb)
    # enough programs to fill a GPU (~2 waves of 132 SMs), few enough rows for registers
    want = next_pow2(max(1, xnumel // 264))
    xb = max(1, min(cap, want, 64, next_pow2(xnumel)))
    out = [Config(xb, rb, _warps(xb * rb, 1, 8))]
    for alt in (xb * 2, xb // 2):
        if 1 <= alt <= min(cap, 64, next_pow2(xnumel)):
            out.append(Config(alt, rb, _warps(alt * rb, 1, 8)))
    return tuple(out)


def _looped_configs(xnumel: int, rnumel: int, outer: bool) -> tuple:
    if outer:
        # rows are contiguous: wide XBLOCK for coalescing, narrower when there are few rows (more programs)
        if xnumel >= 64 * 132:
            cands = [(64, 32, 4), (128, 16, 4), (32, 64, 4)]
        else:
            cands = [(32, 64, 4), (64, 32, 4), (16, 128, 4)]
        xcap = next_pow2(xnumel)
        out = []
        for xb, rb, w in cands:
            xb = min(xb, max(1, xcap))
            rb = min(rb, next_pow2(rnumel))
            c = Config(xb, rb, w)
            if c not in out:
                out.append(c)
        return tuple(out)
    out = []
    for xb, rb, w in ((1, 2048, 8), (1, 1024, 4), (2, 1024, 8)):
        rb = min(rb, next_pow2(rnumel))
        c = Config(min(xb, next_pow2(xnumel)), rb, _warps(xb * rb, 1, w))
        if c not in out:
            out.append(c)
    return tuple(out)


def _index_exprs(k: ir.Kernel):
    for st in k.stages:
        for e in ir.walk(st.expr):
            if isinstance(e, (ir.Load, ir.IndexValue)):
                yield e.index
        if st.store is not None and st.store_index is not None:
            yield st.store_index


def _is_outer_reduction(k: ir.Kernel, mapping, ranges) -> bool:
    """True when the loads walk memory contiguously along the rows (``xindex``) but not along the
    reduction (e.g. a sum over dim 0): such kernels want wide ``XBLOCK`` tiles."""
    r_unit = x_unit = 0
    for st in k.stages:
        idxs = [ld.index for ld in ir.loads(st.expr)]
        if st.kind == "pointwise" and st.store is not None:
            idxs.append(st.store_index)
        for ix in idxs:
            e = simplify_index(ix.xreplace(mapping), ranges)
            if not e.free_symbols:
                continue
            # the address step of one row and of one reduction element, at the start of the tile
            at = {X: 0, R: 0}
            base = int(e.xreplace(at))
            cr = int(e.xreplace({X: 0, R: 1})) - base if ranges.get(R, 1) > 1 else None
            cx = int(e.xreplace({X: 1, R: 0})) - base if ranges.get(X, 1) > 1 else None
            if cr == 1:
                r_unit += 1
            elif cx == 1:
                x_unit += 1
    return x_unit > r_unit


def _flat_mapping(size, dims, sym):
    """Map the kernel variables of ``dims`` (row-major over their sizes) to a flat symbol."""
    xs = variables(len(size))
    mapping = {}
    acc = 1
    for d in reversed(dims):
        s = size[d]
        if s == 1:
            mapping[xs[d]] = sympy.Integer(0)
            continue
        e = FloorDiv(sym, sympy.Integer(acc)) if acc != 1 else sym
        # the outermost dim needs no modulo (the flat index stays below the total)
        mapping[xs[d]] = (e, s, acc)
        acc *= s
    total = acc
    out = {}
    for v, m in mapping.items():
        if isinstance(m, tuple):
            e, s, a = m
            out[v] = e if a * s == total else IMod(e, sympy.Integer(s))
        else:
            out[v] = m
    return out, total


SPLIT_MIN_RNUMEL = 16384  # a row at least this long is split across programs when there are few rows
SPLIT_MAX_ROWS = 32
SPLIT_KINDS = ("sum", "prod", "max", "min", "any", "all", "argmax", "argmin")


def levels(k: ir.Kernel) -> dict:
    """avail[stage]: number of completed passes over the row before the stage's value exists."""
    avail: dict[str, int] = {}
    for st in k.stages:
        deps = [avail[e.name] for e in ir.walk(st.expr) if isinstance(e, ir.Local)]
        need = max(deps, default=0)
        avail[st.name] = need + 1 if st.kind == "reduction" else need
    return avail


def _splittable(k: ir.Kernel) -> bool:
    """One pass of independent reductions (plus pointwise stores that need no reduction and per-row
    epilogues): the row can be cut into chunks reduced by separate programs and combined afterwards."""
    avail = levels(k)
    for st in k.stages:
        if st.kind == "reduction" and (avail[st.name] != 1 or st.reduction not in SPLIT_KINDS):
            return False
        if st.kind == "pointwise" and avail[st.name] != 0:
            return False
    return any(st.kind == "reduction" for st in k.stages)


def _matmul_configs(mm: Contraction) -> tuple:
    """Tile shapes for ``tl.dot``, best guess first (H100-class GPUs; autotuned when the product is large):
    wide tiles and deep pipelines for half precision, smaller ones for float32 (no tensor-core fp32)."""
    if mm.a.dtype == torch.float32:
        cands = [(64, 32, 4, 64, 3), (128, 32, 4, 64, 3), (32, 32, 4, 64, 2)]
    else:
        cands = [(128, 64, 8, 128, 3), (128, 64, 4, 64, 4), (64, 64, 4, 128, 4), (128, 64, 8, 256, 3)]
    out = []
    for bm, bk, w, bn, st in cands:
        bm, bn = max(16, min(bm, next_pow2(mm.m))), max(16, min(bn, next_pow2(mm.n)))
        bk = max(16, min(bk, next_pow2(mm.k)))
        c = Config(bm, bk, w, bn, st)
        if c not in out:
            out.append(c)
    return tuple(out)


def matmul_plan(k: ir.Kernel):
    """The ``matmul`` plan of a kernel that is one contraction followed by per-row stages (its epilogue),
    or None. Its variables stay the kernel's own; the template maps them onto tiles."""
    reds = [st for st in k.stages if st.kind == "reduction"]
    if len(reds) != 1 or any(st.kind == "pointwise" for st in k.stages):
        return None
    mm = of_stage(k, reds[0])
    if mm is None:
        return None
    wide = k.numel > INT32_LIMIT
    for op, sizes in ((mm.a, k.size), (mm.b, k.size)):
        wide = wide or op.offset + sum(abs(st) * (n - 1) for st, n in zip(op.strides, sizes)) > INT32_LIMIT
    rng = dict(zip(variables(len(k.size)), k.size))
    for st in k.stages:
        if st.store is not None:
            b = bounds(st.store_index, rng)
            wide = wide or b is None or b[1] > INT32_LIMIT
    return Plan("matmul", math.prod(k.size[:-1]), mm.k, "tl.int64" if wide else "tl.int32", _matmul_configs(mm),
                mm=mm)


def plan(k: ir.Kernel, persistent_rmax: int = PERSISTENT_RMAX, split_min_rnumel: int = SPLIT_MIN_RNUMEL):
    """(Plan, var mapping old -> flat expr, ranges of the flat symbols)."""
    for _, dt in k.dtypes:
        compute_dtype(dt)
    for st in k.stages:
        compute_dtype(st.dtype)
    mp = matmul_plan(k)
    if mp is not None:
        return mp, {}, {}
    if not k.rdims:
        sizes, cmap = coalesce(k)
        fmap, total = _flat_mapping(sizes, list(range(len(sizes))), X)
        mapping = {old: sympy.sympify(e).xreplace(fmap) for old, e in cmap.items()}
        ranges = {X: max(total, 1)}
        xnumel = math.prod(sizes) if sizes else 1
        rnumel = 1
        template = "pointwise"
        outer = False
    else:
        rdims = sorted(k.rdims)
        odims = [d for d in range(len(k.size)) if d not in rdims]
        omap, xnumel = _flat_mapping(k.size, odims, X)
        rmap, rnumel = _flat_mapping(k.size, rdims, R)
        mapping = {**omap, **rmap}
        ranges = {X: max(xnumel, 1), R: max(rnumel, 1)}
        outer = _is_outer_reduction(k, mapping, ranges)
        if outer and rnumel > 128:
            template = "looped"
        elif next_pow2(rnumel) <= persistent_rmax:
            template = "persistent"
        else:
            template = "looped"
    # index width: int64 when any index (or the iteration count) can reach 2**31
    wide = xnumel * max(rnumel, 1) > INT32_LIMIT
    if not wide:
        for e in _index_exprs(k):
            e = simplify_index(e.xreplace(mapping), ranges)
            b = bounds(e, ranges)
            if b is None or b[1] > INT32_LIMIT or b[0] < -INT32_LIMIT:
                wide = True
                break
    if template == "pointwise":
        configs = _pointwise_configs(xnumel)
    elif template == "persistent":
        if outer:
            rb = next_pow2(rnumel)
            xb = max(1, min(next_pow2(xnumel), max(1, TILE_MAX // rb), 64))
            configs = (Config(xb, rb, _warps(xb * rb, 1, 8)),)
        else:
            configs = _persistent_configs(xnumel, rnumel)
    else:
        configs = _looped_configs(xnumel, rnumel, outer)
    nsplit, rchunk, done = 1, 0, None
    if (template != "pointwise" and 0 < xnumel <= SPLIT_MAX_ROWS and rnumel >= split_min_rnumel
            and _splittable(k)):
        # few long rows: one program per row would leave most of the GPU idle
        split_configs = _looped_configs(xnumel, rnumel, outer)
        unit = max(c.RBLOCK for c in split_configs)
        want = next_pow2(max(2, -(-264 // xnumel)))
        want = min(want, 256, max(1, rnumel // (2 * unit)))
        if want >= 2:
            per_split = -(-rnumel // want)
            rchunk = -(-per_split // unit) * unit
            nsplit = -(-rnumel // rchunk)
        if nsplit >= 2:  # else the template and its configs stay (a persistent row needs RBLOCK >= its length)
            template, configs = "split", split_configs
            sb = next_pow2(nsplit)
            xb2 = max(1, min(next_pow2(xnumel), max(1, 4096 // sb)))
            done = Config(xb2, sb, _warps(xb2 * sb, 1, 4))
        else:
            nsplit, rchunk = 1, 0
    p = Plan(template, xnumel, rnumel, "tl.int64" if wide else "tl.int32", configs, outer, nsplit, rchunk,
             done)
    return p, mapping, ranges
