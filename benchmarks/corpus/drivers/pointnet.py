"""fxia22/pointnet.pytorch: PointNet classification with the feature transform, 2 clouds of 64 points;
training: negative log-likelihood plus the feature-transform regulariser, as its training script does."""

import torch
import torch.nn.functional as F


def build(repo, mode):
    from pointnet.model import PointNetCls, feature_transform_regularizer

    model = PointNetCls(k=3, feature_transform=True)
    g = torch.Generator().manual_seed(1)
    points = torch.randn(2, 3, 64, generator=g)
    labels = torch.tensor([0, 2])

    def loss(out):
        pred, _, trans_feat = out
        return F.nll_loss(pred, labels) + 0.001 * feature_transform_regularizer(trans_feat), "driver"

    return {"model": model, "args": (points,), "loss": loss if mode == "train" else None}
