"""facebookresearch/segment-anything: SAM from a tiny config (64x64 images, patch 8, windowed and global
attention). Eval: ``Sam.forward`` on two prompted images (points on one, a box on the other), as the
repository serves it (it runs under ``torch.no_grad``); training: the fine-tuning step users write around
it (image encoder, prompt encoder, mask decoder; mean square error of the low-resolution masks against a
fixed target plus the IoU prediction)."""

from functools import partial

import torch
from torch import nn


def _sam():
    from segment_anything.modeling import ImageEncoderViT, MaskDecoder, PromptEncoder, Sam, TwoWayTransformer

    size, patch, dim = 64, 8, 32
    return Sam(
        image_encoder=ImageEncoderViT(depth=2, embed_dim=dim, img_size=size, mlp_ratio=2,
                                      norm_layer=partial(nn.LayerNorm, eps=1e-6), num_heads=2, patch_size=patch,
                                      qkv_bias=True, use_rel_pos=True, global_attn_indexes=[1], window_size=4,
                                      out_chans=dim),
        prompt_encoder=PromptEncoder(embed_dim=dim, image_embedding_size=(size // patch, size // patch),
                                     input_image_size=(size, size), mask_in_chans=8),
        mask_decoder=MaskDecoder(num_multimask_outputs=3,
                                 transformer=TwoWayTransformer(depth=2, embedding_dim=dim, mlp_dim=64, num_heads=2),
                                 transformer_dim=dim, iou_head_depth=2, iou_head_hidden_dim=32),
        pixel_mean=[123.675, 116.28, 103.53], pixel_std=[58.395, 57.12, 57.375])


class FineTune(nn.Module):
    def __init__(self, sam):
        super().__init__()
        self.sam = sam

    def forward(self, images, points, labels):
        emb = self.sam.image_encoder(torch.stack([self.sam.preprocess(x) for x in images]))
        masks, ious = [], []
        for i in range(images.shape[0]):  # one image's embedding, its prompts (as Sam.forward does)
            sparse, dense = self.sam.prompt_encoder(points=(points[i:i + 1], labels[i:i + 1]), boxes=None, masks=None)
            m, iou = self.sam.mask_decoder(image_embeddings=emb[i:i + 1], image_pe=self.sam.prompt_encoder.get_dense_pe(),
                                           sparse_prompt_embeddings=sparse, dense_prompt_embeddings=dense,
                                           multimask_output=False)
            masks.append(m)
            ious.append(iou)
        return torch.cat(masks), torch.cat(ious)


def build(repo, mode):
    g = torch.Generator().manual_seed(1)
    sam = _sam()
    images = torch.rand(2, 3, 64, 64, generator=g) * 255
    if mode == "eval":
        batched = [{"image": images[0], "original_size": (64, 64), "point_coords": torch.tensor([[[20.0, 30.0]]]),
                    "point_labels": torch.tensor([[1]])},
                   {"image": images[1], "original_size": (64, 64), "boxes": torch.tensor([[10.0, 10.0, 40.0, 50.0]])}]
        return {"model": sam, "args": (batched, True)}
    points = torch.tensor([[[20.0, 30.0]], [[40.0, 12.0]]])
    labels = torch.tensor([[1], [1]])
    target = (torch.rand(2, 1, 32, 32, generator=g) > 0.5).float()

    def loss(out):
        masks, iou = out
        return ((masks - target) ** 2).mean() + iou.pow(2).mean(), "driver"

    return {"model": FineTune(sam), "args": (images, points, labels), "loss": loss}
