"""lucidrains/mixture-of-experts: the top-2 gated MoE layer (``moe``) and the hierarchical one
(``hierarchical``) on 2 x 8 tokens of width 16; training: the outputs' mean square plus the layer's own
auxiliary (load-balancing) loss."""

import torch


def _loss(out):
    y, aux = out
    return y.pow(2).mean() + aux, "driver"


def moe(repo, mode):
    from mixture_of_experts import MoE

    model = MoE(dim=16, num_experts=4, hidden_dim=32)
    x = torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(1))
    return {"model": model, "args": (x,), "loss": _loss if mode == "train" else None}


def hierarchical(repo, mode):
    from mixture_of_experts import HeirarchicalMoE

    model = HeirarchicalMoE(dim=16, num_experts=(2, 2), hidden_dim=32)
    x = torch.randn(2, 8, 16, generator=torch.Generator().manual_seed(1))
    return {"model": model, "args": (x,), "loss": _loss if mode == "train" else None}


ROWS = {"moe": moe, "hierarchical": hierarchical}
