"""Messages in control flow of the forward: in a helper called from one arm of a branch on a tensor (the
other arm's helper is silent), at a level the logger filters out, inside `torch.no_grad()`, before an early return
for some shapes, in a closure defined in the forward, in a parent's forward reached through `super()`, and in
blocks of a `ModuleList` iterated with their index."""
import logging

import torch
from torch import nn

logger = logging.getLogger("observed.branches")


def loud(x):
    print("loud arm", x.shape[0])
    return x + 1


def quiet(x):
    return x - 1


class Layer(nn.Module):
    def forward(self, x, i):
        logging.info("layer %d of width %d", i, x.shape[-1])
        return x * 0.5


class Parent(nn.Module):
    def forward(self, x):
        print("parent forward", tuple(x.shape))
        return x.abs()


class Child(Parent):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([Layer(), Layer()])

    def forward(self, x):
        y = super().forward(x) - 1
        y = loud(y) if y.sum() > 0 else quiet(y)
        logger.debug("debug only %s", y.sum())
        logger.info("info, sum %s", y.sum())
        with torch.no_grad():
            print("no grad block", y.mean())
        for i, layer in enumerate(self.layers):
            y = layer(y, i)

        def report(tag):
            print("closure", tag, y.shape[0])

        report("end")
        if x.shape[0] == 1:
            print("single row: early exit")
            return y
        return y.sum(0)


NO_GRAD = True


def make():
    return Child(), [torch.full((2, 2), 3.0), torch.zeros(2, 2), torch.full((1, 2), 3.0), torch.ones(3, 2)]
