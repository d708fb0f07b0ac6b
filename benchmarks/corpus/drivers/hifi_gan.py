"""jik876/hifi-gan: the generator step of its training script: the V3 generator on 8 mel frames (2,048
samples), both discriminators on the real and the generated audio; training: the generator's adversarial
and feature-matching losses (the mel L1 term needs librosa's filters and is left out)."""

import json

import torch
from torch import nn


def build(repo, mode):
    from env import AttrDict
    from models import Generator, MultiPeriodDiscriminator, MultiScaleDiscriminator, feature_loss, generator_loss

    h = AttrDict(json.loads((repo / "config_v3.json").read_text()))

    class Step(nn.Module):
        def __init__(self):
            super().__init__()
            self.generator = Generator(h)
            self.mpd = MultiPeriodDiscriminator()
            self.msd = MultiScaleDiscriminator()

        def forward(self, mel, y):
            y_g_hat = self.generator(mel)
            return (y_g_hat, self.mpd(y, y_g_hat), self.msd(y, y_g_hat))

    g = torch.Generator().manual_seed(1)
    mel = torch.randn(1, 80, 8, generator=g)
    y = torch.randn(1, 1, 2048, generator=g) * 0.1

    def loss(out):
        _, (_, y_df_g, fmap_f_r, fmap_f_g), (_, y_ds_g, fmap_s_r, fmap_s_g) = out
        gen_f, _ = generator_loss(y_df_g)
        gen_s, _ = generator_loss(y_ds_g)
        return gen_f + gen_s + feature_loss(fmap_f_r, fmap_f_g) + feature_loss(fmap_s_r, fmap_s_g), "driver"

    return {"model": Step(), "args": (mel, y), "loss": loss if mode == "train" else None}
