"""Reporting calls of every shape in one forward: tensor values printed, a value changed in place right after
it was printed, %-args and f-strings with format specs, `sep=`/`end=`/`file=`, a warning with its category, a
record below the logger's level, messages in a Python loop, and a module constant as a keyword value."""
import logging
import sys
import warnings

import torch
from torch import nn

logger = logging.getLogger("observed.effects")
SEPARATOR = " / "


class Effects(nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        print("relu", y)
        y.add_(100)  # the message above reports the values before this change
        logger.warning("after add, first row %s of %d rows", y[0], y.shape[0])
        print(f"mean={y.mean():.2f} rows={y.shape[0]:>2}", "max", y.max(), sep=SEPARATOR)
        for i in range(2):
            print("step", i, end=" ")
            y = y - 1
        print(file=sys.stderr)
        logger.debug("filtered out: %s", y.sum())
        warnings.warn(f"stale option for {y.shape[1]} columns", DeprecationWarning)
        logger.info("sum %.1f", y.sum())
        return y * 2


NO_GRAD = True


def make():
    return Effects(), [torch.tensor([[1.0, -2.0], [3.0, 0.5]]), torch.full((2, 2), -1.0),
                       torch.arange(6.0).reshape(3, 2)]
