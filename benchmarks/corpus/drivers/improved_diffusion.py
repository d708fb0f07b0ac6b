"""openai/improved-diffusion: a small UNetModel (32 channels, one residual block a level, attention at
resolution 8, learned sigmas) with its Gaussian diffusion (100 steps, cosine schedule). Eval: one sampling
step (``p_sample``); training: ``training_losses`` (MSE plus the variational bound term for the learned
variance) at fixed timesteps and noise, as its TrainLoop computes it."""

import torch
from torch import nn


def build(repo, mode):
    from improved_diffusion import gaussian_diffusion as gd
    from improved_diffusion.respace import SpacedDiffusion, space_timesteps
    from improved_diffusion.unet import UNetModel

    unet = UNetModel(in_channels=3, model_channels=32, out_channels=6, num_res_blocks=1, attention_resolutions=(2,),
                     dropout=0.1, channel_mult=(1, 2), num_heads=2, use_scale_shift_norm=True)
    diffusion = SpacedDiffusion(use_timesteps=space_timesteps(100, [100]),
                                betas=gd.get_named_beta_schedule("cosine", 100),
                                model_mean_type=gd.ModelMeanType.EPSILON, model_var_type=gd.ModelVarType.LEARNED_RANGE,
                                loss_type=gd.LossType.MSE, rescale_timesteps=True)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 3, 16, 16, generator=g)
    t = torch.tensor([3, 70])

    class Step(nn.Module):
        def __init__(self):
            super().__init__()
            self.unet = unet

        def forward(self, x, t, noise):
            if self.training:
                return diffusion.training_losses(self.unet, x, t, noise=noise)["loss"].mean()
            return diffusion.p_sample(self.unet, x, t, clip_denoised=True)["sample"]

    return {"model": Step(), "args": (x, t, torch.randn(2, 3, 16, 16, generator=g)),
            "loss": lambda out: (out, "labels")}
