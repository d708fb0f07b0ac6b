"""qubvel/segmentation_models.pytorch: three of its architectures with a ResNet-18 encoder (random weights,
``encoder_weights=None``) on two 64x64 images, 3 classes: ``unet`` (Unet with SCSE attention), ``fpn`` (FPN)
and ``deeplab`` (DeepLabV3+); training: its DiceLoss plus cross-entropy against a fixed mask."""

import torch
import torch.nn.functional as F


def _build(arch, mode, **kwargs):
    import segmentation_models_pytorch as smp

    model = getattr(smp, arch)(encoder_name="resnet18", encoder_weights=None, in_channels=3, classes=3, **kwargs)
    g = torch.Generator().manual_seed(1)
    images = torch.randn(2, 3, 64, 64, generator=g)
    mask = torch.randint(0, 3, (2, 64, 64), generator=g)
    dice = smp.losses.DiceLoss("multiclass")

    def loss(out):
        return dice(out, mask) + F.cross_entropy(out, mask), "driver"

    return {"model": model, "args": (images,), "loss": loss if mode == "train" else None}


ROWS = {"unet": lambda repo, mode: _build("Unet", mode, decoder_attention_type="scse"),
        "fpn": lambda repo, mode: _build("FPN", mode),
        "deeplab": lambda repo, mode: _build("DeepLabV3Plus", mode)}
