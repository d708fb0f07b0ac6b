"""facebookresearch/detr: DETR with a ResNet-18 backbone (random weights), 2 encoder and 2 decoder layers,
10 queries, on two images of different sizes (padded into a NestedTensor, as its data loader does). Eval:
the model and its PostProcess (boxes scaled to each image's size); training: its SetCriterion (Hungarian
matching) with auxiliary losses, summed with the weight dictionary as engine.py does.

Shims, each what a user on current packages writes: the backbone is built with ``pretrained=False``
(``is_main_process`` would download ImageNet weights), and util/misc.py's version test, which reads
torchvision "0.29" as 0.2, sees a version it takes for new."""

from types import SimpleNamespace

import torch
from torch import nn


def _args():
    return SimpleNamespace(dataset_file="coco", device="cpu", num_queries=10, aux_loss=True, masks=False,
                           frozen_weights=None, bbox_loss_coef=5, giou_loss_coef=2, mask_loss_coef=1,
                           dice_loss_coef=1, dec_layers=2, enc_layers=2, eos_coef=0.1, lr_backbone=1e-5,
                           backbone="resnet18", dilation=False, hidden_dim=32, position_embedding="sine",
                           dropout=0.1, nheads=2, dim_feedforward=64, pre_norm=False, set_cost_class=1,
                           set_cost_bbox=5, set_cost_giou=2)


def build(repo, mode):
    import torchvision

    real = torchvision.__version__
    torchvision.__version__ = "0.99"
    try:
        import util.misc as misc
    finally:
        torchvision.__version__ = real
    import models.backbone as backbone
    from models.detr import build as build_detr

    backbone.is_main_process = lambda: False
    model, criterion, post = build_detr(_args())
    g = torch.Generator().manual_seed(1)
    images = [torch.rand(3, 64, 64, generator=g), torch.rand(3, 48, 64, generator=g)]
    samples = misc.nested_tensor_from_tensor_list(images)
    if mode == "train":
        targets = [{"labels": torch.tensor([1, 3]), "boxes": torch.tensor([[0.3, 0.3, 0.2, 0.3], [0.6, 0.5, 0.3, 0.2]])},
                   {"labels": torch.tensor([2]), "boxes": torch.tensor([[0.5, 0.5, 0.4, 0.4]])}]

        def loss(out):
            losses = criterion(out, targets)
            return sum(losses[k] * w for k, w in criterion.weight_dict.items() if k in losses), "labels"

        return {"model": model, "args": (samples,), "loss": loss}

    class Detect(nn.Module):
        def __init__(self):
            super().__init__()
            self.model, self.post = model, post["bbox"]

        def forward(self, samples, sizes):
            return self.post(self.model(samples), sizes)

    return {"model": Detect(), "args": (samples, torch.tensor([[64, 64], [48, 64]]))}
