"""karpathy/nanoGPT: GPT with a tiny config; training passes targets (the model's own cross-entropy)."""

import torch


def build(repo, mode):
    from model import GPT, GPTConfig

    model = GPT(GPTConfig(block_size=32, vocab_size=96, n_layer=2, n_head=2, n_embd=32, dropout=0.1))
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, 96, (2, 16), generator=g)
    if mode == "train":
        return {"model": model, "args": (idx,), "kwargs": {"targets": torch.roll(idx, -1, 1)},
                "loss": lambda out: (out[1], "labels")}
    return {"model": model, "args": (idx,)}
