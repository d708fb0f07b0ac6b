"""lucidrains/denoising-diffusion-pytorch: GaussianDiffusion around a small Unet (dim 16, two resolutions,
self-conditioning on) for 16x16 images, 100 timesteps; the forward is its training loss (random timesteps
and noise, self-conditioning half the time), in eval under no_grad and in training with backward."""

import torch


def build(repo, mode):
    from denoising_diffusion_pytorch import GaussianDiffusion, Unet

    unet = Unet(dim=16, dim_mults=(1, 2), channels=3, self_condition=True, attn_dim_head=8, attn_heads=2,
                flash_attn=False)
    model = GaussianDiffusion(unet, image_size=16, timesteps=100)
    images = torch.rand(2, 3, 16, 16, generator=torch.Generator().manual_seed(1))
    return {"model": model, "args": (images,), "loss": lambda out: (out, "labels")}
