"""Residual blocks with a LayerNorm (nanoGPT's shape), each logging its input's rows in its forward; the
model around them is what torch.compile sees, called for inference (no_grad: Inductor compiles an
inference graph). The message's arguments are Python numbers only: the graph's operator gets no tensor."""
import logging

import torch
from torch import nn

logger = logging.getLogger("observed")


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(32)
        self.lin = nn.Linear(32, 32)

    def forward(self, x):
        logger.warning("block saw %d rows", x.shape[0])
        return x + self.lin(self.norm(x))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])
        self.norm = nn.LayerNorm(32)

    def forward(self, x):
        x = x + 1
        for block in self.blocks:
            x = block(x)
        return self.norm(x)


NO_GRAD = True


def make():
    return Model().eval(), [torch.randn(n, 8, 32) for n in (2, 3, 4)]
