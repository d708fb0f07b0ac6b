"""Training mode for the zoo's rows: the loss, the gradients, the random-number state, and a backend that
counts forward and backward graphs. Imports torch.

A training step is ``model.train()``, a forward (with labels where the head takes them), a loss, and
``loss.backward()``. What it leaves is flattened like an output (:func:`step_tensors`): the outputs, the
loss and every parameter's gradient (``grad.NAME``; a parameter without a gradient is a 0-element int8
tensor, so "no gradient" and "a gradient" never compare equal), which is what the parent compares
bitwise between the original and a repaired source, and within tolerance between eager and compiled.

:func:`rng_digest` is a hash of every random-number state a model can draw from (torch's CPU generator,
the CUDA generators when initialised, Python's ``random``, numpy's global state): equal digests after
the same seeded step mean the same numbers were drawn as many times.
"""

from __future__ import annotations

import hashlib
import random
from typing import Any

import torch

from benchmarks.zoo.compare import flatten


def loss_of(out: Any) -> tuple[torch.Tensor, str]:
    """The step's loss and where it came from: the model's own ``loss`` (it took labels), else the mean
    square of every floating output that needs a gradient (a loss that reaches every parameter the output
    depends on)."""
    own = out.get("loss") if isinstance(out, dict) else getattr(out, "loss", None)
    if isinstance(own, torch.Tensor) and own.requires_grad:
        return own.float().sum(), "labels"
    parts = [t for _, t in _live(out) if t.is_floating_point() or t.is_complex()]
    if not parts:
        raise ValueError("no output needs a gradient: nothing to train")
    return sum(t.abs().float().pow(2).mean() if t.is_complex() else t.float().pow(2).mean() for t in parts), "outputs"


def _live(out: Any, prefix: str = "out") -> list[tuple[str, torch.Tensor]]:
    """Output tensors that still carry autograd history (``flatten`` detaches)."""
    if isinstance(out, torch.Tensor):
        return [(prefix, out)] if out.requires_grad else []
    if isinstance(out, dict):
        return [t for k, v in out.items() for t in _live(v, f"{prefix}.{k}")]
    if isinstance(out, (list, tuple)):
        return [t for i, v in enumerate(out) for t in _live(v, f"{prefix}[{i}]")]
    if hasattr(out, "__dict__") and not isinstance(out, (type, torch.nn.Module)):
        return [t for k, v in sorted(vars(out).items()) if not k.startswith("_") for t in _live(v, f"{prefix}.{k}")]
    return []


NO_GRAD = torch.zeros(0, dtype=torch.int8)


def grads(model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    return [(f"grad.{n}", p.grad.detach().cpu() if p.grad is not None else NO_GRAD)
            for n, p in model.named_parameters() if p.requires_grad]


def step_tensors(out: Any, loss: torch.Tensor, model: torch.nn.Module) -> list[tuple[str, torch.Tensor]]:
    return flatten(out) + [("loss", loss.detach().cpu())] + grads(model)


def rng_digest() -> str:
    h = hashlib.sha256(torch.get_rng_state().numpy().tobytes())
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        for s in torch.cuda.get_rng_state_all():
            h.update(s.numpy().tobytes())
    h.update(repr(random.getstate()).encode())
    try:
        import numpy as np

        state = np.random.get_state()
        h.update(state[1].tobytes() + repr(state[2:]).encode())
    except ImportError:
        pass
    return h.hexdigest()[:16]


def seed_all(seed: int) -> None:
    torch.manual_seed(seed)
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:
        pass


class TrainBackend:
    """A ``torch.compile`` backend for training steps: AOTAutograd over every captured graph, each forward
    and backward graph counted and run as traced (no decompositions, no fusion: the numbers are eager's
    up to the order AOTAutograd puts operations in)."""

    def __init__(self) -> None:
        from torch._dynamo.backends.common import aot_autograd
        from torch._functorch.aot_autograd import make_boxed_func

        self.forward_graphs = 0
        self.backward_graphs = 0

        def fw(gm: Any, example_inputs: Any) -> Any:
            self.forward_graphs += 1
            return make_boxed_func(gm.forward)

        def bw(gm: Any, example_inputs: Any) -> Any:
            self.backward_graphs += 1
            return make_boxed_func(gm.forward)

        self.backend = aot_autograd(fw_compiler=fw, bw_compiler=bw)

    def __call__(self, gm: Any, example_inputs: Any) -> Any:
        return self.backend(gm, example_inputs)
