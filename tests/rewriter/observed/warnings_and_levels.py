"""Warnings with a category, a logger below its level, .format messages, and a report under a tensor condition."""
import logging
import sys
import warnings

import torch
from torch import nn

logger = logging.getLogger("observed")


class Block(nn.Module):
    def forward(self, x):
        logger.debug("not shown: %s", x.shape)
        warnings.warn("block {} is deprecated".format(x.shape[1]), FutureWarning)
        y = x * 1000
        if (y.abs() > 1500).any():
            logger.warning("large activations")
        print("block out", y.shape[0], file=sys.stderr)
        return y


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([Block(), Block()])

    def forward(self, x):
        for b in self.blocks:
            x = b(x) / 1000
        return x


def make():
    return Net(), [torch.full((2, 3), 0.5), torch.full((2, 3), 2.0), torch.full((3, 3), 0.1)]
