"""A module with a learning-rate-style warm-up driven by a Python step counter.

Known recompiles (torch 2.13, default config): ``self.step += 1`` mutates an int attribute of the
module in forward. Dynamo treats int attributes of an nn.Module as static, so every call sees a new
value and compiles again (guard ``self.step == N``), until the recompile limit (8) is hit and the
frame falls back to eager.
"""

from __future__ import annotations

import torch
from torch import nn


class WarmupScaled(nn.Module):
    def __init__(self, dim: int = 32, warmup: int = 100) -> None:
        super().__init__()
        self.lin = nn.Linear(dim, dim)
        self.warmup = warmup
        self.step = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.step += 1
        scale = min(1.0, self.step / self.warmup)
        return self.lin(x) * scale


def harness():
    torch.manual_seed(0)
    model = WarmupScaled().eval()
    return model, (torch.randn(8, 32),), {}
