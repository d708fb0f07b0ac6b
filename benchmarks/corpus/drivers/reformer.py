"""lucidrains/reformer-pytorch: ReformerLM (LSH attention with 2 hashes and buckets of 4, reversible layers
with their recorded random state, layer dropout, chunked feed-forward) on 2 x 32 tokens; training:
next-token cross-entropy."""

import torch
import torch.nn.functional as F


def build(repo, mode):
    from reformer_pytorch import ReformerLM

    model = ReformerLM(num_tokens=96, dim=32, depth=2, max_seq_len=32, heads=2, dim_head=16, bucket_size=4,
                       n_hashes=2, causal=True, lsh_dropout=0.1, ff_dropout=0.1, layer_dropout=0.1, ff_chunks=2)
    ids = torch.randint(0, 96, (2, 32), generator=torch.Generator().manual_seed(1))

    def loss(logits):
        return F.cross_entropy(logits[:, :-1].reshape(-1, 96), ids[:, 1:].reshape(-1)), "driver"

    return {"model": model, "args": (ids,), "loss": loss if mode == "train" else None}
