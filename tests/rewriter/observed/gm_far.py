"""Helpers of `gm_regions` in a module of their own: one reached from its compiled forward, one only eagerly.
Not a program by itself."""
import logging

logger = logging.getLogger("observed.far")


def far_scale(x):
    print("far scale", x.shape[0], x.mean())
    return x * 4


def far_orphan(x):
    logger.warning("far orphan %d", x.shape[0])
    return x
