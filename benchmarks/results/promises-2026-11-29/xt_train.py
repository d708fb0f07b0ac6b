"""A user's training step on x-transformers' 'options' model, compiled (``mend run`` records its breaks):
the package is imported from MEND_TREE."""
import os
import sys

import torch

sys.path.insert(0, os.path.abspath(os.environ["MEND_TREE"]))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from xt_harness import harness  # noqa: E402

model, args, kwargs = harness()
step = torch.compile(model, backend="eager")
for _ in range(2):
    step(*args, **kwargs).sum().backward()
print("trained two steps")
