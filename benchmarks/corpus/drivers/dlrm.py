"""facebookresearch/dlrm: DLRM_Net (dlrm_s_pytorch.py) with 3 embedding tables of 10/20/30 rows, dimension 4,
bottom MLP 8-16-4, dot interaction, top MLP 10-8-1 with a sigmoid; a batch of 4 with 1-3 lookups per bag
(offsets and indices as its data generator makes them); training: binary cross-entropy on click labels."""

import numpy as np
import torch
import torch.nn.functional as F


def build(repo, mode):
    import dlrm_s_pytorch as d

    model = d.DLRM_Net(m_spa=4, ln_emb=np.array([10, 20, 30]), ln_bot=np.array([8, 16, 4]),
                       ln_top=np.array([10, 8, 1]), arch_interaction_op="dot", sigmoid_bot=-1, sigmoid_top=1,
                       ndevices=-1)
    g = torch.Generator().manual_seed(1)
    dense = torch.rand(4, 8, generator=g)
    counts = torch.tensor([[1, 2, 3, 1], [2, 1, 1, 3], [3, 3, 1, 2]])
    offsets = [torch.cat([torch.zeros(1, dtype=torch.long), c.cumsum(0)[:-1]]) for c in counts]
    indices = [torch.randint(0, n, (int(c.sum()),), generator=g) for n, c in zip((10, 20, 30), counts)]
    clicks = torch.tensor([[1.0], [0.0], [0.0], [1.0]])
    return {"model": model, "args": (dense, offsets, indices),
            "loss": (lambda out: (F.binary_cross_entropy(out, clicks), "driver")) if mode == "train" else None}
