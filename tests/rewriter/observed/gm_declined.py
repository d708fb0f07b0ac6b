"""Reporting calls whose arguments the graph cannot carry (`*args` and `**kwargs` unpacked, `stacklevel=`,
`extra=`, a keyword value computed in the forward): the repair declines them, so they stay as written, at their graph break.
Beside them, calls that only look like reports: a method named `warning` on an object that is not a logger
and a helper whose name starts with `warn` that reports nothing. Also left: a message in a method of a submodule
that a factory built, which mend cannot prove to be the submodule's class."""
import logging

import torch
from torch import nn

logger = logging.getLogger("observed.declined")


class Notes:
    def warning(self, text, rows):
        print("note:", text, rows)


NOTES = Notes()


class Block(nn.Module):
    def spare(self, x):
        logger.info("spare block of %d rows", x.shape[0])
        return x / 2


def make_block():
    return Block()


def warn_and_scale(x):
    return x * 2


class Declined(nn.Module):
    def __init__(self):
        super().__init__()
        self.opaque = make_block()

    def forward(self, x, words):
        y = warn_and_scale(torch.relu(x))
        print("words", *words)
        logger.warning("rows %d", y.shape[0], **{"stacklevel": 1})
        logger.warning("with stacklevel %d", y.shape[0], stacklevel=2)
        logger.warning("with extra", extra={"rows": y.shape[0]})
        print("sum", y.sum(), sep=str(y.shape[0]))
        NOTES.warning("not a logger", y.shape[0])
        if logger.isEnabledFor(logging.INFO):  # the test breaks the graph (a Logger method): reported, not repaired
            logger.info("info enabled, sum %s", y.sum())
        return self.opaque.spare(y) + 1


NO_GRAD = True


def make():
    return Declined(), [(torch.ones(2, 2), ["a", "b"]), (torch.ones(3, 2), ["c"])]
