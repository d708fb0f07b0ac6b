"""alxndrTL/mamba.py: a two-layer Mamba language model (parallel scan in training, as the repository does)."""

import torch


def build(repo, mode):
    from mambapy.lm import LM
    from mambapy.mamba import MambaConfig

    model = LM(MambaConfig(d_model=32, n_layers=2), vocab_size=96)
    idx = torch.randint(0, 96, (2, 16), generator=torch.Generator().manual_seed(1))
    return {"model": model, "args": (idx,)}
