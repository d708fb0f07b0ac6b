"""microsoft/Swin-Transformer: Swin (row ``v1``, shifted windows with the attention mask) and Swin V2 (row
``v2``, log-spaced continuous position bias), 32x32 images, patch 2, windows of 4, two stages, drop path;
training: cross-entropy against fixed labels."""

import torch
import torch.nn.functional as F


def _build(version, mode):
    if version == 1:
        from models.swin_transformer import SwinTransformer as cls
    else:
        from models.swin_transformer_v2 import SwinTransformerV2 as cls
    model = cls(img_size=32, patch_size=2, in_chans=3, num_classes=10, embed_dim=16, depths=[2, 2], num_heads=[1, 2],
                window_size=4, drop_path_rate=0.1)
    images = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    labels = torch.tensor([1, 7])
    return {"model": model, "args": (images,),
            "loss": (lambda out: (F.cross_entropy(out, labels), "driver")) if mode == "train" else None}


ROWS = {"v1": lambda repo, mode: _build(1, mode), "v2": lambda repo, mode: _build(2, mode)}
