"""sooftware/conformer: a two-layer Conformer on 2 utterances of 32 frames x 16 features (lengths 32 and 28);
training: CTC against random targets, as its README trains it."""

import torch
from torch import nn


def build(repo, mode):
    from conformer import Conformer

    model = Conformer(num_classes=10, input_dim=16, encoder_dim=32, num_encoder_layers=2, num_attention_heads=2,
                      conv_kernel_size=7)
    g = torch.Generator().manual_seed(1)
    inputs = torch.randn(2, 32, 16, generator=g)
    lengths = torch.tensor([32, 28])
    targets = torch.randint(1, 10, (2, 5), generator=g)
    target_lengths = torch.tensor([5, 4])
    ctc = nn.CTCLoss()

    def loss(out):
        outputs, output_lengths = out
        return ctc(outputs.transpose(0, 1), targets, output_lengths, target_lengths), "driver"

    return {"model": model, "args": (inputs, lengths), "loss": loss if mode == "train" else None}
