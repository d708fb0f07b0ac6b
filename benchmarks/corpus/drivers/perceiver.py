"""lucidrains/perceiver-pytorch: ``perceiver`` (the Perceiver on 16x16 images with Fourier features) and
``io`` (PerceiverLM, Perceiver IO as a masked language model, with a padding mask). Training: cross-entropy
against fixed labels / the input tokens."""

import torch
import torch.nn.functional as F


def perceiver(repo, mode):
    from perceiver_pytorch import Perceiver

    model = Perceiver(input_channels=3, input_axis=2, num_freq_bands=4, max_freq=8.0, depth=2, num_latents=8,
                      latent_dim=32, cross_heads=1, latent_heads=2, cross_dim_head=16, latent_dim_head=16,
                      num_classes=10, attn_dropout=0.1, ff_dropout=0.1)
    img = torch.randn(2, 16, 16, 3, generator=torch.Generator().manual_seed(1))
    labels = torch.tensor([1, 7])
    return {"model": model, "args": (img,),
            "loss": (lambda out: (F.cross_entropy(out, labels), "driver")) if mode == "train" else None}


def io(repo, mode):
    from perceiver_pytorch import PerceiverLM

    model = PerceiverLM(num_tokens=96, dim=32, depth=2, max_seq_len=32, num_latents=8, latent_dim=32,
                        cross_heads=1, latent_heads=2, cross_dim_head=16, latent_dim_head=16)
    ids = torch.randint(0, 96, (2, 16), generator=torch.Generator().manual_seed(1))
    mask = torch.ones(2, 16, dtype=torch.bool)
    mask[1, 11:] = False

    def loss(logits):
        return F.cross_entropy(logits.reshape(-1, 96), ids.reshape(-1)), "driver"

    return {"model": model, "args": (ids,), "kwargs": {"mask": mask}, "loss": loss if mode == "train" else None}


ROWS = {"perceiver": perceiver, "io": io}
