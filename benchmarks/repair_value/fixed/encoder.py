"""A BERT-base-shaped encoder written the way many model files are, for ``mend bench --repair-value`` at the
size users run (``MEND_BENCH_DEVICE=cuda``: 4 layers, hidden 768, 12 heads, batch 8 x 512 tokens with a
padding mask, bfloat16; on a CPU: tiny).

Graph breaks under torch.compile: ``logger.debug`` in every layer (GB0291) and the float16 overflow guard
``if torch.isinf(h).any() ...`` (GB0170, data-dependent branching). ``fixed/encoder.py`` is this file after
``mend fix --unsafe-fixes``.
"""

from __future__ import annotations

import logging
import os

import torch
import torch.nn.functional as F
from torch import nn


@torch.compiler.disable
def _mend_emit(spec, *args):
    """Call the reporting function ``spec`` names with ``args`` (added by mend fix).

    ``spec``: the callee, a global of this module or a builtin (``logger.info``, ``print``), then
    ``:name`` for each keyword argument (their values end ``args``), then `` i.view`` where argument
    ``i`` is a tensor whose shape is reported (``shape``, ``tuple``, ``list``) or, for ``global``, the
    name of a builtin or imported object (a warning category). Registered with Dynamo
    as a reorderable logging function: in a compiled graph the call runs right after the graph, with
    the arguments as they were at the call (tensors that could change later are passed as copies).
    Disabled for Dynamo itself, so the replayed call runs as plain Python."""
    import builtins

    def find(name):
        head, *path = name.split(".")
        obj = globals()[head] if head in globals() else getattr(builtins, head)
        for part in path:
            obj = getattr(obj, part)
        return obj

    call, *views = spec.split(" ")
    name, *keywords = call.split(":")
    fn = find(name)
    args = list(args)
    for view in views:
        i, how = view.split(".")
        if how == "global":  # the object travels as its name: Dynamo reorders strings, not classes
            args[int(i)] = find(args[int(i)])
            continue
        shape = args[int(i)].shape
        args[int(i)] = shape if how == "shape" else tuple(shape) if how == "tuple" else list(shape)
    cut = len(args) - len(keywords)
    fn(*args[:cut], **dict(zip(keywords, args[cut:])))


if hasattr(torch._dynamo.config, "reorderable_logging_functions"):
    torch._dynamo.config.reorderable_logging_functions.add(_mend_emit)


def _mend_where(cond, new, old):
    """``new if cond else old`` as tensor ops while torch.compile traces (added by mend fix).

    torch.where when both sides are tensors of one shape, dtype and device and the condition is one
    element; tuples and lists of one length element by element, None on both sides as it is; all
    decided while tracing; otherwise the original selection (a graph break there)."""
    if isinstance(cond, torch.Tensor) and cond.numel() == 1:
        if (isinstance(new, torch.Tensor) and isinstance(old, torch.Tensor) and new.shape == old.shape
                and new.dtype == old.dtype and new.device == old.device):
            return torch.where(cond.reshape(()), new, old)
        if type(new) in (tuple, list) and type(old) is type(new) and len(new) == len(old):
            return type(new)(_mend_where(cond, a, b) for a, b in zip(new, old))
        if new is None and old is None:
            return None
    return new if cond else old  # noqa: MND201


logger = logging.getLogger(__name__)


class Layer(nn.Module):
    def __init__(self, dim: int, heads: int, inner: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.out = nn.Linear(dim, dim)
        self.ln1 = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, inner)
        self.down = nn.Linear(inner, dim)
        self.ln2 = nn.LayerNorm(dim)

    def forward(self, x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
        if not torch.compiler.is_compiling():
            logger.debug("layer input %s", tuple(x.shape))
        else:
            _mend_emit("logger.debug 1.tuple", "layer input %s", x)
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        h = self.ln1(x + self.out(a.transpose(1, 2).reshape(b, t, d)))
        if not torch.compiler.is_compiling():
            if torch.isinf(h).any() or torch.isnan(h).any():
                clamp_value = torch.finfo(h.dtype).max - 1000
                h = torch.clamp(h, min=-clamp_value, max=clamp_value)
        else:
            _mend_cond0 = torch.logical_or(torch.isinf(h).any(), torch.isnan(h).any())
            clamp_value = torch.finfo(h.dtype).max - 1000
            h = _mend_where(_mend_cond0, torch.clamp(h, min=-clamp_value, max=clamp_value), h)
        return self.ln2(h + self.down(F.gelu(self.up(h))))


class Encoder(nn.Module):
    def __init__(self, vocab: int, dim: int, heads: int, inner: int, layers: int, max_len: int) -> None:
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(max_len, dim)
        self.ln = nn.LayerNorm(dim)
        self.layers = nn.ModuleList(Layer(dim, heads, inner) for _ in range(layers))

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.ln(self.tok(ids) + self.pos(pos))
        # additive padding mask, [batch, 1, 1, keys], as BERT builds it
        bias = (1.0 - mask[:, None, None, :].to(x.dtype)) * torch.finfo(x.dtype).min
        for layer in self.layers:
            x = layer(x, bias)
        return x


def harness():
    """(model, args, kwargs) for ``mend bench`` and ``mend fix --verify``."""
    cuda = os.environ.get("MEND_BENCH_DEVICE", "cpu").startswith("cuda")
    torch.manual_seed(0)
    if cuda:
        vocab, dim, heads, inner, layers, batch, seq, dtype = 30522, 768, 12, 3072, 4, 8, 512, torch.bfloat16
    else:
        vocab, dim, heads, inner, layers, batch, seq, dtype = 256, 64, 4, 128, 2, 2, 16, torch.float32
    device = "cuda" if cuda else "cpu"
    model = Encoder(vocab, dim, heads, inner, layers, seq).to(device=device, dtype=dtype).eval()
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, vocab, (batch, seq), generator=g).to(device)
    lengths = torch.randint(seq // 2, seq + 1, (batch,), generator=g)
    mask = (torch.arange(seq)[None, :] < lengths[:, None]).long().to(device)
    return model, (ids, mask), {}
