"""A compiled training step with timing and progress output inside it.

Known graph breaks (torch 2.13, default config):
  * ``t0 = time.perf_counter()``       -> GB0007 (builtin marked as skipped)
  * ``loss.backward()``                -> GB0123 (Tensor.backward() without trace_autograd_ops)
  * ``print("step took", ...)``        -> GB0007 (time.perf_counter again) and GB0059 (print)
"""

from __future__ import annotations

import time

import torch
from torch import nn

model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.1)


@torch.compile(backend="eager")
def train_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    t0 = time.perf_counter()
    loss = nn.functional.mse_loss(model(x), y)
    loss.backward()
    print("step took", round(time.perf_counter() - t0, 4), "s")
    return loss.detach()


def harness():
    torch.manual_seed(0)
    x, y = torch.randn(8, 16), torch.randn(8, 1)
    return train_step, (x, y), {}
