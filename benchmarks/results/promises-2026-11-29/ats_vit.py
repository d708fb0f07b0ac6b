"""vit-pytorch's ViT with adaptive token sampling (ats_vit.py), tiny, compiled, one call in eval:
``python ats_vit.py DIR`` imports vit_pytorch from DIR."""
import sys

import torch

sys.path.insert(0, sys.argv[1])
from vit_pytorch.ats_vit import ViT  # noqa: E402

torch.manual_seed(0)
model = ViT(image_size=32, patch_size=8, num_classes=10, dim=32, depth=2, max_tokens_per_depth=(8, 4), heads=2,
            mlp_dim=64, dim_head=16).eval()
with torch.no_grad():
    print("logits", tuple(torch.compile(model, backend="eager")(torch.randn(2, 3, 32, 32)).shape))
