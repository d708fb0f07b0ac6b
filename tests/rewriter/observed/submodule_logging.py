"""A submodule logs and prints in its forward; its parent module is what torch.compile sees."""
import logging

import torch
from torch import nn

logger = logging.getLogger("observed")


class Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        logger.warning("inner saw %d rows", x.shape[0])
        print("inner print", x.shape[0])
        return self.lin(x).relu()


class Outer(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()

    def forward(self, x):
        return self.inner(x) * 2


def make():
    return Outer(), [torch.randn(n, 4) for n in (2, 2, 3, 5)]
