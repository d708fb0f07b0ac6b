"""tkipf/pygcn: the two-layer GCN on a random graph of 20 nodes with a sparse, row-normalised adjacency (as
its utils build it); training: the negative log-likelihood of the node labels."""

import torch
import torch.nn.functional as F


def graph(nodes=20, feats=8, seed=1):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(nodes, feats, generator=g)
    adj = (torch.rand(nodes, nodes, generator=g) < 0.2).float()
    adj = ((adj + adj.t()) > 0).float() + torch.eye(nodes)
    adj = adj / adj.sum(1, keepdim=True)
    labels = torch.randint(0, 3, (nodes,), generator=g)
    return x, adj, labels


def build(repo, mode):
    from pygcn.models import GCN

    model = GCN(nfeat=8, nhid=16, nclass=3, dropout=0.5)
    x, adj, labels = graph()
    return {"model": model, "args": (x, adj.to_sparse()),
            "loss": (lambda out: (F.nll_loss(out, labels), "driver")) if mode == "train" else None}
