"""The corpus's x-transformers 'options' row (benchmarks/corpus/drivers/x_transformers.py), in training mode,
for ``mend fix --verify``: it imports the package from the folder MEND_TREE names, wherever it lives."""
import os
import sys

import torch

sys.path.insert(0, os.environ["MEND_TREE"])


def harness():
    from x_transformers import Decoder, TransformerWrapper

    torch.manual_seed(0)
    model = TransformerWrapper(
        num_tokens=96, max_seq_len=32, num_memory_tokens=2,
        attn_layers=Decoder(dim=32, depth=3, heads=2, alibi_pos_bias=True, alibi_num_heads=1, attn_num_mem_kv=2,
                            layer_dropout=0.2, sandwich_norm=True, ff_glu=True, residual_attn=True))
    ids = torch.randint(1, 96, (2, 16), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids).bool()
    mask[0, 10:] = False
    return model, (ids,), {"mask": mask}
