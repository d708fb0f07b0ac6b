"""Size profiles: the numbers the shrinker caps a config at and the input sizes of the zoo.

``tiny`` is for the CPU (every model type in a few seconds); ``real`` is for the GPU (the sizes users run:
hidden 768, 4 layers, batch 8 x 512 tokens or images of 224).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Profile:
    name: str
    hidden: int  # hidden sizes, embedding sizes, model dims
    heads: int  # attention heads
    kv_heads: int  # key/value heads (grouped-query attention)
    head_dim: int  # explicit head dims
    layers: int  # layers of every stack (encoder, decoder, vision tower, ...)
    intermediate: int  # feed-forward sizes
    vocab: int  # vocabulary sizes; special token ids above it are remapped below it
    positions: int  # position-embedding tables
    image: int  # image sizes (pixels)
    patch: int  # patch sizes
    window: int  # local-attention windows (divides ``seq``: no padding unless a variant asks for it)
    queries: int  # object queries of detection models (at most the feature positions of a small image)
    experts: int  # experts of mixture-of-experts layers
    experts_per_token: int
    batch: int
    seq: int  # text tokens
    decoder_seq: int  # decoder tokens of encoder-decoder models
    audio_samples: int  # raw waveform length
    audio_frames: int  # spectrogram frames


PROFILES: dict[str, Profile] = {
    "tiny": Profile("tiny", hidden=64, heads=4, kv_heads=2, head_dim=16, layers=2, intermediate=128, vocab=256,
                    positions=512, image=64, patch=8, window=8, queries=16, experts=4, experts_per_token=2, batch=2, seq=16,
                    decoder_seq=8, audio_samples=4000, audio_frames=64),
    "real": Profile("real", hidden=768, heads=12, kv_heads=4, head_dim=64, layers=4, intermediate=3072, vocab=32000,
                    positions=2048, image=224, patch=16, window=256, queries=100, experts=8, experts_per_token=2, batch=8, seq=512,
                    decoder_seq=128, audio_samples=16000, audio_frames=3000),
}


def profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        raise ValueError(f"unknown size profile {name!r}; choose from {', '.join(PROFILES)}") from None
