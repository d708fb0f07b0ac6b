"""pytorch-labs/gpt-fast: the LLaMA-style Transformer with its KV cache set up, a prefill of 16 tokens."""

import torch


def build(repo, mode):
    from model import ModelArgs, Transformer

    model = Transformer(ModelArgs(block_size=64, vocab_size=96, n_layer=2, n_head=4, dim=32, intermediate_size=64,
                                  n_local_heads=2))
    model.setup_caches(max_batch_size=2, max_seq_length=32)
    idx = torch.randint(0, 96, (2, 16), generator=torch.Generator().manual_seed(1))
    return {"model": model, "args": (idx, torch.arange(16))}
