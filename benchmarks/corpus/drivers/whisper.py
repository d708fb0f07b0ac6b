"""openai/whisper: Whisper from tiny dimensions, its uninitialised text positions drawn from a seeded
generator; a mel spectrogram and decoder tokens (teacher forcing in training: cross-entropy on the next
token)."""

import torch
import torch.nn.functional as F


def build(repo, mode):
    from whisper.model import ModelDimensions, Whisper

    dims = ModelDimensions(n_mels=16, n_audio_ctx=16, n_audio_state=32, n_audio_head=2, n_audio_layer=2,
                           n_vocab=96, n_text_ctx=16, n_text_state=32, n_text_head=2, n_text_layer=2)
    model = Whisper(dims)
    g = torch.Generator().manual_seed(1)
    # the text decoder's positional embedding is `torch.empty` (a checkpoint fills it): whatever memory held,
    # NaN at times, and different in each process, so the original and a repaired copy did not compare
    with torch.no_grad():
        model.decoder.positional_embedding.normal_(0.0, 0.02, generator=g)
    mel = torch.randn(2, 16, 32, generator=g)
    tokens = torch.randint(0, 96, (2, 8), generator=g)

    def loss(logits):
        return F.cross_entropy(logits[:, :-1].reshape(-1, 96), tokens[:, 1:].reshape(-1)), "labels"

    return {"model": model, "args": (mel, tokens), "loss": loss if mode == "train" else None}
