"""johnma2006/mamba-minimal: a two-layer Mamba language model."""

import torch


def build(repo, mode):
    from model import Mamba, ModelArgs

    model = Mamba(ModelArgs(d_model=32, n_layer=2, vocab_size=96))
    idx = torch.randint(0, 96, (2, 16), generator=torch.Generator().manual_seed(1))
    return {"model": model, "args": (idx,)}
