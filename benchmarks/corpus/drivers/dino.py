"""facebookresearch/dino: the multi-crop student as DINO trains it (utils.MultiCropWrapper around a tiny ViT
and the DINO head): two global crops of 32x32 and two local crops of 16x16 (the position embedding is
interpolated for the local ones)."""

import torch


def build(repo, mode):
    import utils
    import vision_transformer as vits

    vit = vits.VisionTransformer(img_size=[32], patch_size=8, embed_dim=32, depth=2, num_heads=2, mlp_ratio=2.0,
                                 drop_path_rate=0.1)
    head = vits.DINOHead(32, 16, nlayers=2, hidden_dim=32, bottleneck_dim=16)
    model = utils.MultiCropWrapper(vit, head)
    g = torch.Generator().manual_seed(1)
    crops = [torch.randn(2, 3, 32, 32, generator=g) for _ in range(2)] + \
        [torch.randn(2, 3, 16, 16, generator=g) for _ in range(2)]
    return {"model": model, "args": (crops,)}
