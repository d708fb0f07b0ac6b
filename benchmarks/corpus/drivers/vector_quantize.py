"""lucidrains/vector-quantize-pytorch: four quantizers on 2 x 16 vectors: ``vq`` (VectorQuantize with k-means
init and EMA codebook updates, cosine off), ``residual`` (ResidualVQ, 2 quantizers, with quantizer dropout),
``fsq`` (FSQ with projections), ``lfq`` (LFQ with projections and its entropy loss). Training: reconstruction error plus each quantizer's
auxiliary loss."""

import torch


def _x(dim=16):
    return torch.randn(2, 16, dim, generator=torch.Generator().manual_seed(1))


def _loss(x):
    def loss(out):
        quantized = out[0]
        aux = out[2] if len(out) > 2 and isinstance(out[2], torch.Tensor) else 0.0
        return ((quantized - x) ** 2).mean() + (aux.sum() if isinstance(aux, torch.Tensor) else aux), "driver"

    return loss


def vq(repo, mode):
    from vector_quantize_pytorch import VectorQuantize

    x = _x()
    model = VectorQuantize(dim=16, codebook_size=32, decay=0.8, commitment_weight=1.0, kmeans_init=True,
                           kmeans_iters=2)
    return {"model": model, "args": (x,), "loss": _loss(x) if mode == "train" else None}


def residual(repo, mode):
    from vector_quantize_pytorch import ResidualVQ

    x = _x()
    model = ResidualVQ(dim=16, num_quantizers=2, codebook_size=32, quantize_dropout=True)
    return {"model": model, "args": (x,), "loss": _loss(x) if mode == "train" else None}


def fsq(repo, mode):
    from vector_quantize_pytorch import FSQ

    x = _x()
    model = FSQ(levels=[8, 5, 5, 5], dim=16)
    return {"model": model, "args": (x,), "loss": _loss(x) if mode == "train" else None}


def lfq(repo, mode):
    from vector_quantize_pytorch import LFQ

    x = _x()
    model = LFQ(codebook_size=256, dim=16, entropy_loss_weight=0.1, diversity_gamma=1.0)
    return {"model": model, "args": (x,), "loss": _loss(x) if mode == "train" else None}


ROWS = {"vq": vq, "residual": residual, "fsq": fsq, "lfq": lfq}
