"""Where a message sits relative to the compiled module: in a method inherited from a base class, in a
method of the module called through `self`, in a method of a submodule the constructor assigns to an
attribute, in a `forward` a submodule gets from a mixin, two plain calls down, and in a
helper of another module. Methods and functions the forward never reaches run eagerly between the calls."""
import logging

import torch
from gm_far import far_orphan, far_scale
from torch import nn

logger = logging.getLogger("observed.regions")


def deep(x):
    print("deep", x.shape[0], x.sum())
    return x * 3


def middle(x):
    return deep(torch.relu(x))


def orphan(x):
    print("orphan runs eagerly", x.shape[0])
    return x


class Base(nn.Module):
    def shift(self, x):
        logger.warning("base shift of %d rows", x.shape[0])
        return x + 1

    def base_orphan(self, x):
        print("base orphan", x.shape)


class Mixin:
    def forward(self, x):
        print("mixin forward", tuple(x.shape))
        return x * 2

    def mixin_orphan(self, x):
        logger.info("mixin orphan %d", x.shape[0])


class Held(Mixin, nn.Module):
    pass


class Block(nn.Module):
    def project(self, x):
        print("block project", x.shape[-1])
        return x - 1

    def forward(self, x):
        return x


class Net(Base):
    def __init__(self):
        super().__init__()
        self.blk = Block()
        self.held = Held()

    def forward(self, x):
        y = self.shift(torch.relu(x))
        y = self.step(self.blk.project(y))
        y = self.held(y)
        return far_scale(middle(y)).sum()

    def step(self, x):
        logger.info("step on %s", tuple(x.shape))
        return x * 0.5

    def unused(self, x):
        print("unused method", x.shape[0])


def make():
    return Net(), [torch.ones(2, 3), torch.ones(2, 3), torch.full((4, 3), -1.0)]


def between(model, args):
    x = args[0]
    model.base_orphan(x)
    model.held.mixin_orphan(x)
    model.unused(x)
    far_orphan(orphan(x))


NO_GRAD = True
BETWEEN = between
