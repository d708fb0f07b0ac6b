"""A masked token loss that normalises by a Python number, as training loops often do.

Known graph breaks (torch 2.13, default config):
  * ``n = mask.sum().item()``                 -> GB0124 (Tensor.item() without scalar capture)
  * ``logits[mask].float().mean()`` reduction -> GB0036 (dynamic-shape operator, boolean mask)
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def masked_token_loss(logits: torch.Tensor, targets: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    losses = F.cross_entropy(logits.transpose(1, 2), targets, reduction="none")
    n = mask.sum().item()
    loss = (losses * mask).sum() / max(n, 1)
    confidence = logits.softmax(-1).amax(-1)[mask].mean()
    return loss + 0.01 * confidence


def harness():
    torch.manual_seed(0)
    logits = torch.randn(4, 12, 50)
    targets = torch.randint(0, 50, (4, 12))
    mask = torch.rand(4, 12) > 0.3
    return masked_token_loss, (logits, targets, mask), {}
