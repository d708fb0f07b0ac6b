"""openai/CLIP: CLIP with a tiny ViT image tower (row ``vit``) and with the modified ResNet (row ``resnet``);
training: the symmetric contrastive loss over the batch."""

import torch
import torch.nn.functional as F


def _build(vision_layers, mode):
    from clip.model import CLIP

    model = CLIP(embed_dim=16, image_resolution=32, vision_layers=vision_layers, vision_width=64,
                 vision_patch_size=8, context_length=12, vocab_size=96, transformer_width=32, transformer_heads=2,
                 transformer_layers=2)
    g = torch.Generator().manual_seed(1)
    image = torch.randn(3, 3, 32, 32, generator=g)
    text = torch.randint(1, 90, (3, 12), generator=g)
    text[:, 8] = 95  # the end-of-text token: the highest id, where CLIP reads each text's features

    def loss(out):
        labels = torch.arange(3)
        return (F.cross_entropy(out[0], labels) + F.cross_entropy(out[1], labels)) / 2, "driver"

    return {"model": model, "args": (image, text), "loss": loss if mode == "train" else None}


ROWS = {"vit": lambda repo, mode: _build(2, mode), "resnet": lambda repo, mode: _build((1, 1, 1, 1), mode)}
