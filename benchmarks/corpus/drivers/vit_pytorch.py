"""lucidrains/vit-pytorch: four of its models, tiny: ``vit`` (the plain ViT), ``navit`` (NaViT on images of
different resolutions, packed as its README shows, with token dropout), ``cait`` (CaiT with layer dropout)
and ``levit`` (LeViT with distillation head). Training: cross-entropy against fixed labels."""

import torch
import torch.nn.functional as F


def _ce(n):
    labels = torch.arange(n) % 10

    def loss(out):
        logits = out[0] if isinstance(out, tuple) else out
        return F.cross_entropy(logits, labels), "driver"

    return loss


def _images(n, size=32):
    return torch.randn(n, 3, size, size, generator=torch.Generator().manual_seed(1))


def vit(repo, mode):
    from vit_pytorch import ViT

    model = ViT(image_size=32, patch_size=8, num_classes=10, dim=32, depth=2, heads=2, mlp_dim=64, dim_head=16,
                dropout=0.1, emb_dropout=0.1)
    return {"model": model, "args": (_images(2),), "loss": _ce(2) if mode == "train" else None}


def navit(repo, mode):
    from vit_pytorch.na_vit import NaViT

    model = NaViT(image_size=64, patch_size=8, num_classes=10, dim=32, depth=2, heads=2, mlp_dim=64, dim_head=16,
                  dropout=0.1, emb_dropout=0.1, token_dropout_prob=0.1)
    g = torch.Generator().manual_seed(1)
    images = [[torch.randn(3, 64, 64, generator=g), torch.randn(3, 32, 32, generator=g)],
              [torch.randn(3, 32, 64, generator=g), torch.randn(3, 64, 32, generator=g)],
              [torch.randn(3, 16, 64, generator=g)]]
    return {"model": model, "args": (images,), "loss": _ce(5) if mode == "train" else None}


def cait(repo, mode):
    from vit_pytorch.cait import CaiT

    model = CaiT(image_size=32, patch_size=8, num_classes=10, dim=32, depth=2, cls_depth=1, heads=2, mlp_dim=64,
                 dim_head=16, dropout=0.1, emb_dropout=0.1, layer_dropout=0.1)
    return {"model": model, "args": (_images(2),), "loss": _ce(2) if mode == "train" else None}


def levit(repo, mode):
    from vit_pytorch.levit import LeViT

    model = LeViT(image_size=64, num_classes=10, stages=3, dim=(32, 48, 64), depth=1, heads=(2, 2, 2), mlp_mult=2,
                  dim_key=8, dim_value=16, dropout=0.1, num_distill_classes=10)
    return {"model": model, "args": (_images(2, 64),), "loss": _ce(2) if mode == "train" else None}


ROWS = {"vit": vit, "navit": navit, "cait": cait, "levit": levit}
