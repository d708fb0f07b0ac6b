"""A pooling classifier that validates its mask, as library code often does.

Known graph breaks (torch 2.13, default config):
  * ``if (mask.sum(-1) == 0).any(): raise ValueError(...)`` -> GB0170 (data-dependent branching)
  * ``print(...)`` of a debug message                        -> GB0059 (builtin print)
"""

from __future__ import annotations

import torch
from torch import nn

DEBUG = True


class MaskedPoolClassifier(nn.Module):
    def __init__(self, dim: int = 32, classes: int = 5) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(dim, dim), nn.Tanh())
        self.head = nn.Linear(dim, classes)

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        if (mask.sum(-1) == 0).any():
            raise ValueError("every sequence needs at least one unmasked position")
        h = self.encoder(x)
        if DEBUG:
            print("pooling", h.shape[1], "positions")
        m = mask.unsqueeze(-1).to(h.dtype)
        pooled = (h * m).sum(1) / m.sum(1)
        return self.head(pooled)


def harness():
    torch.manual_seed(0)
    model = MaskedPoolClassifier().eval()
    x = torch.randn(4, 10, 32)
    mask = torch.ones(4, 10, dtype=torch.bool)
    mask[:, 7:] = False
    return model, (x, mask), {}


def failing_harness():
    """Same model, but one row is fully masked: the forward must raise ValueError."""
    model, (x, mask), kwargs = harness()
    mask[1] = False
    return model, (x, mask), kwargs
