"""Drive every example under torch.compile, as a training or serving script would.

``mend run examples/run_all.py`` records each graph break and recompile this program hits.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

import item_loss  # noqa: E402
import step_counter  # noqa: E402
import transformer_block  # noqa: E402
import validated_model  # noqa: E402

BACKEND = "eager"


def main(calls: int = 4) -> None:
    torch.manual_seed(0)
    for module in (transformer_block, validated_model, step_counter):
        model, args, kwargs = module.harness()
        compiled = torch.compile(model, backend=BACKEND)
        with torch.no_grad():
            for _ in range(calls):
                out = compiled(*args, **kwargs)
        print(f"{module.__name__}: output {tuple(out.shape)}")
    fn, args, kwargs = item_loss.harness()
    loss_fn = torch.compile(fn, backend=BACKEND)
    for _ in range(calls):
        loss = loss_fn(*args, **kwargs)
    print(f"item_loss: {loss.item():.4f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
