"""yenchenlin/nerf-pytorch: NeRF as run_nerf.py builds it (create_nerf: positional encoding, coarse and fine
networks of depth 2 and width 32, view directions), rendering 64 rays with 8 coarse and 8 importance samples
(hierarchical sampling, perturbed samples and density noise in training), as its training loop renders a
batch of rays; training: the image loss of the coarse and the fine colours against fixed targets."""

import tempfile
from types import SimpleNamespace

import torch
from torch import nn


def build(repo, mode):
    import run_nerf as rn

    base = tempfile.mkdtemp(prefix="nerf-")
    args = SimpleNamespace(i_embed=0, multires=4, multires_views=2, use_viewdirs=True, N_importance=8, netdepth=2,
                           netwidth=32, netdepth_fine=2, netwidth_fine=32, netchunk=1024, lrate=5e-4, basedir=base,
                           expname="run", ft_path=None, no_reload=True, perturb=1.0, N_samples=8, white_bkgd=False,
                           raw_noise_std=1.0, dataset_type="blender", no_ndc=True, lindisp=False)
    import os

    os.makedirs(os.path.join(base, "run"), exist_ok=True)
    train_kwargs, test_kwargs, _, _, _ = rn.create_nerf(args)
    kwargs = dict(train_kwargs if mode == "train" else test_kwargs, near=2.0, far=6.0)
    g = torch.Generator().manual_seed(1)
    rays_o = torch.randn(64, 3, generator=g) * 0.1
    rays_d = torch.nn.functional.normalize(torch.randn(64, 3, generator=g), dim=-1)
    target = torch.rand(64, 3, generator=g)
    K = torch.tensor([[20.0, 0.0, 4.0], [0.0, 20.0, 4.0], [0.0, 0.0, 1.0]])

    class Render(nn.Module):
        def __init__(self):
            super().__init__()
            self.coarse, self.fine = kwargs["network_fn"], kwargs["network_fine"]

        def forward(self, rays_o, rays_d):
            rgb, disp, acc, extras = rn.render(8, 8, K, chunk=1024, rays=torch.stack([rays_o, rays_d]), **kwargs)
            return rgb, disp, acc, extras["rgb0"]

    def loss(out):
        return rn.img2mse(out[0], target) + rn.img2mse(out[3], target), "driver"

    return {"model": Render(), "args": (rays_o, rays_d), "loss": loss if mode == "train" else None}
