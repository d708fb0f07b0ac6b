"""Messages in a loop, before and after a number read from a tensor (`.item()`) that decides a Python loop,
with the program's own output between calls."""
import logging

import torch
from torch import nn

logger = logging.getLogger("observed")


class Stack(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(3, 3) for _ in range(3)])

    def forward(self, x):
        for i, layer in enumerate(self.layers):
            x = layer(x)
            print("layer", i, "rows", x.shape[0], end="; ")
        print()
        steps = int(x.abs().sum().item() * 1000) % 3
        logger.info("extra steps: %d", steps)
        for _ in range(steps):
            x = x * 0.5
        logger.info("done with %s", tuple(x.shape))
        return x


def make():
    return Stack(), [torch.randn(n, 3) for n in (2, 2, 4)]
