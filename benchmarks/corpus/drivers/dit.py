"""facebookresearch/DiT: a two-block DiT on 8x8 latents; training: the noise-prediction loss of a random
timestep (mean square error against fixed noise), with classifier-free label dropout as the model does it."""

import torch
import torch.nn.functional as F


def build(repo, mode):
    from models import DiT

    model = DiT(input_size=8, patch_size=2, in_channels=4, hidden_size=32, depth=2, num_heads=2, num_classes=10,
                learn_sigma=False)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 4, 8, 8, generator=g)
    t = torch.tensor([10, 500])
    y = torch.tensor([1, 7])
    noise = torch.randn(2, 4, 8, 8, generator=g)

    def loss(out):
        return F.mse_loss(out, noise), "driver"

    return {"model": model, "args": (x, t, y), "loss": loss if mode == "train" else None}
