"""facebookresearch/mae: the masked autoencoder on 32x32 images, patch 8; its own reconstruction loss.

The repository pins timm 0.3.2, whose ``Block`` took ``qk_scale``; newer timm dropped the argument, so the
driver hands the model a ``Block`` that ignores it, and gives numpy back ``np.float`` (util/pos_embed.py;
removed in numpy 1.24): what a user on current timm and numpy writes."""

import numpy as np
import timm.models.vision_transformer as tv
import torch


class Block(tv.Block):
    def __init__(self, *args, qk_scale=None, **kwargs):
        super().__init__(*args, **kwargs)


def build(repo, mode):
    if not hasattr(np, "float"):
        np.float = float
    import models_mae

    models_mae.Block = Block
    model = models_mae.MaskedAutoencoderViT(img_size=32, patch_size=8, in_chans=3, embed_dim=32, depth=2,
                                            num_heads=2, decoder_embed_dim=32, decoder_depth=1, decoder_num_heads=2,
                                            mlp_ratio=2.0)
    imgs = torch.randn(2, 3, 32, 32, generator=torch.Generator().manual_seed(1))
    return {"model": model, "args": (imgs,), "loss": lambda out: (out[0], "labels")}
