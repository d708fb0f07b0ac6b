"""A plain function compiled at its call site (no module), with a helper one call down, whose messages come
before an exception it raises for some inputs: the messages made before the raise reach the streams first,
in order, on every call that raises too; a message in a `finally:` is made after them whether the call raises
or not."""
import logging

import torch

logger = logging.getLogger("observed.exits")


def check_rows(x):
    print("checking", x.shape[0], "rows")
    return x.abs()


def run(x):
    y = check_rows(x)
    try:
        logger.warning("max before the check: %s", y.max())
        if x.shape[0] > 2:
            raise ValueError(f"too many rows: {x.shape[0]}")
        print("passed with", y.sum())
    finally:
        print("checked", x.shape[0])
    return y * 2


compiled_run = torch.compile(run)  # the call-site wrap by which mend finds the entry; the runner compiles `run`
RAISES = (ValueError,)


def make():
    return run, [torch.ones(2, 2), torch.ones(3, 2), torch.ones(2, 2), torch.ones(5, 2)]
