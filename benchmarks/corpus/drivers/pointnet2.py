"""yanx27/Pointnet_Pointnet2_pytorch: a PointNet++ classifier built like its ``pointnet2_cls_ssg`` from the
repository's set-abstraction layers (farthest-point sampling, ball query, grouping), with 16 and 8 centroids
instead of 512 and 128 so that a cloud of 64 points stays small; training: its own loss."""

import torch
import torch.nn.functional as F
from torch import nn


def build(repo, mode):
    from pointnet2_utils import PointNetSetAbstraction

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.sa1 = PointNetSetAbstraction(npoint=16, radius=0.4, nsample=8, in_channel=3, mlp=[16, 16, 32],
                                              group_all=False)
            self.sa2 = PointNetSetAbstraction(npoint=8, radius=0.8, nsample=8, in_channel=32 + 3, mlp=[32, 32, 64],
                                              group_all=False)
            self.sa3 = PointNetSetAbstraction(npoint=None, radius=None, nsample=None, in_channel=64 + 3,
                                              mlp=[64, 64], group_all=True)
            self.fc = nn.Linear(64, 3)
            self.drop = nn.Dropout(0.4)

        def forward(self, xyz):
            l1_xyz, l1_points = self.sa1(xyz, None)
            l2_xyz, l2_points = self.sa2(l1_xyz, l1_points)
            _, l3_points = self.sa3(l2_xyz, l2_points)
            return F.log_softmax(self.fc(self.drop(l3_points.view(xyz.shape[0], 64))), -1)

    model = Net()
    g = torch.Generator().manual_seed(1)
    points = torch.rand(2, 3, 64, generator=g)
    labels = torch.tensor([0, 2])
    return {"model": model, "args": (points,),
            "loss": (lambda out: (F.nll_loss(out, labels), "driver")) if mode == "train" else None}
