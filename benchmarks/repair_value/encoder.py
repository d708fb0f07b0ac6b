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
        logger.debug("layer input %s", tuple(x.shape))
        b, t, d = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        a = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        h = self.ln1(x + self.out(a.transpose(1, 2).reshape(b, t, d)))
        if torch.isinf(h).any() or torch.isnan(h).any():
            clamp_value = torch.finfo(h.dtype).max - 1000
            h = torch.clamp(h, min=-clamp_value, max=clamp_value)
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
