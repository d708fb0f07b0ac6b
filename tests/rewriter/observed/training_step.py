"""A training step: messages in the forward of a submodule, then backward."""
import logging

import torch
from torch import nn

logger = logging.getLogger("observed")


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 1)

    def forward(self, x, y):
        pred = self.lin(x).squeeze(-1)
        loss = ((pred - y) ** 2).mean()
        logger.info("batch of %d", x.shape[0])
        print("loss", loss.detach())
        return loss


class Train(nn.Module):
    def __init__(self):
        super().__init__()
        self.head = Head()

    def forward(self, x, y):
        loss = self.head(x, y)
        return loss


def make():
    torch.manual_seed(0)
    return Train(), [(torch.randn(n, 3), torch.randn(n)) for n in (4, 4, 6)]


TRAIN = True
