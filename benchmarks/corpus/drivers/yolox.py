"""Megvii-BaseDetection/YOLOX: YOLOX-nano (depth 0.33, width 0.25, depthwise) on two 64x64 images, 5 classes.
Eval: the model and its post-processing (``yolox.utils.postprocess``: confidence filter and per-class NMS), as
its demo runs them; training: the model's own loss (SimOTA assignment) for two boxes an image."""

import torch
from torch import nn


def build(repo, mode):
    from yolox.models import YOLOPAFPN, YOLOX, YOLOXHead
    from yolox.utils import postprocess

    in_channels = [256, 512, 1024]
    backbone = YOLOPAFPN(0.33, 0.25, in_channels=in_channels, depthwise=True)
    head = YOLOXHead(5, 0.25, in_channels=in_channels, depthwise=True)
    model = YOLOX(backbone, head)
    g = torch.Generator().manual_seed(1)
    images = torch.rand(2, 3, 64, 64, generator=g) * 255
    if mode == "train":
        targets = torch.zeros(2, 4, 5)
        targets[:, 0] = torch.tensor([1.0, 20.0, 24.0, 16.0, 20.0])
        targets[:, 1] = torch.tensor([3.0, 40.0, 40.0, 24.0, 18.0])
        return {"model": model, "args": (images, targets), "loss": lambda out: (out["total_loss"], "labels")}

    class Detect(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = model

        def forward(self, x):
            return postprocess(self.model(x), 5, conf_thre=0.001, nms_thre=0.65)

    return {"model": Detect(), "args": (images,)}
