"""A print two calls below a compiled module's forward, with an f-string of a shape, interleaved with the
module's own output."""
import torch
from torch import nn


def scale(x):
    print(f"scale {tuple(x.shape)} rows={x.shape[0]:>3}", flush=True)
    return x * 3


def shift(x):
    return scale(x) + 1


class Step(nn.Module):
    def forward(self, x):
        y = shift(x)
        print("step done", y.shape, sep=" | ")
        return y.sum(0)


def make():
    return Step(), [torch.randn(n, 3) for n in (2, 4, 4, 7)]
