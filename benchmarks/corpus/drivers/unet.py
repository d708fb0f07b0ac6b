"""milesial/Pytorch-UNet: the UNet (its fixed widths) on one 3x32x32 image, 2 classes; training: the
repository's loss, cross-entropy plus its Dice loss."""

import torch
import torch.nn.functional as F


def build(repo, mode):
    from unet import UNet
    from utils.dice_score import dice_loss

    model = UNet(n_channels=3, n_classes=2, bilinear=True)
    g = torch.Generator().manual_seed(1)
    image = torch.randn(1, 3, 32, 32, generator=g)
    mask = torch.randint(0, 2, (1, 32, 32), generator=g)

    def loss(pred):
        return F.cross_entropy(pred, mask) + dice_loss(F.softmax(pred, dim=1).float(),
                                                       F.one_hot(mask, 2).permute(0, 3, 1, 2).float(),
                                                       multiclass=True), "driver"

    return {"model": model, "args": (image,), "loss": loss if mode == "train" else None}
