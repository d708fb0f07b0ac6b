"""A pre-norm transformer block, written the way many model files are.

Known graph breaks under torch.compile (torch 2.13, default config):
  * ``logger.debug(...)`` in forward            -> GB0291 (logging.Logger method)
  * the fp16 overflow guard ``if torch.isinf(h).any() or torch.isnan(h).any():``
                                                 -> GB0170 (data-dependent branching)
"""

from __future__ import annotations

import logging

import torch
import torch.nn.functional as F
from torch import nn

logger = logging.getLogger(__name__)


class Attention(nn.Module):
    def __init__(self, dim: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, d = x.shape
        q, k, v = self.qkv(x).chunk(3, dim=-1)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(b, t, d))


class Block(nn.Module):
    def __init__(self, dim: int = 64, heads: int = 4) -> None:
        super().__init__()
        self.ln1 = nn.LayerNorm(dim)
        self.attn = Attention(dim, heads)
        self.ln2 = nn.LayerNorm(dim)
        self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        logger.debug("block input shape %s", tuple(x.shape))
        h = x + self.attn(self.ln1(x))
        # Clamp inf/nan values that fp16 activations can overflow into.
        if torch.isinf(h).any() or torch.isnan(h).any():
            clamp_value = torch.finfo(h.dtype).max - 1000
            h = torch.clamp(h, min=-clamp_value, max=clamp_value)
        return h + self.mlp(self.ln2(h))


def harness():
    """(model, args, kwargs) for ``mend fix --verify`` and ``mend bench``."""
    torch.manual_seed(0)
    model = Block().eval()
    x = torch.randn(2, 16, 64)
    return model, (x,), {}
