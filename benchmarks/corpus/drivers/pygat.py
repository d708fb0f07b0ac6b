"""Diego999/pyGAT: the dense GAT (row ``gat``) and the sparse one with its own spmm autograd function (row
``spgat``), on a random graph of 20 nodes; training: the negative log-likelihood of the node labels."""

import torch
import torch.nn.functional as F


def _graph(nodes=20, feats=8):
    g = torch.Generator().manual_seed(1)
    x = torch.randn(nodes, feats, generator=g)
    adj = (torch.rand(nodes, nodes, generator=g) < 0.2).float()
    adj = ((adj + adj.t()) > 0).float() + torch.eye(nodes)
    return x, adj, torch.randint(0, 3, (nodes,), generator=g)


def _build(cls_name, mode):
    import models

    model = getattr(models, cls_name)(nfeat=8, nhid=8, nclass=3, dropout=0.3, alpha=0.2, nheads=2)
    x, adj, labels = _graph()
    return {"model": model, "args": (x, adj),
            "loss": (lambda out: (F.nll_loss(out, labels), "driver")) if mode == "train" else None}


ROWS = {"gat": lambda repo, mode: _build("GAT", mode), "spgat": lambda repo, mode: _build("SpGAT", mode)}
