"""karpathy/minGPT: GPT with a tiny config; training passes targets (the model's own cross-entropy)."""

import torch


def build(repo, mode):
    from mingpt.model import GPT

    cfg = GPT.get_default_config()
    cfg.model_type = None
    cfg.n_layer, cfg.n_head, cfg.n_embd = 2, 2, 32
    cfg.vocab_size, cfg.block_size = 96, 32
    model = GPT(cfg)
    g = torch.Generator().manual_seed(1)
    idx = torch.randint(0, 96, (2, 16), generator=g)
    if mode == "train":
        return {"model": model, "args": (idx,), "kwargs": {"targets": torch.roll(idx, -1, 1)},
                "loss": lambda out: (out[1], "labels")}
    return {"model": model, "args": (idx,)}
