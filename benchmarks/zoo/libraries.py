"""The library corpora: one model per builder of torchvision, timm, diffusers and torch_geometric.

Each library's model zoo, built with random weights (no download: ``weights=None``, ``pretrained=False``),
small inputs, eval and train like the transformers zoo. A *builder* is an architecture module (torchvision's
``resnet``, timm's ``vision_transformer``...): the row is its smallest model (by the names below), so a
family costs one row, not one per size. Rows are listed without building anything.

* torchvision: classification (64x64 images; the families that need more get more), detection and instance
  segmentation (two images, ``min_size`` 128; training passes boxes, labels, masks and keypoints as
  targets and sums the loss dictionary), semantic segmentation, video (8 frames of 64x64), optical flow;
* timm: every architecture module's smallest model (``img_size=64`` where the model takes it);
* diffusers: the model classes of ``diffusers.models`` that run alone (UNets, autoencoders, transformers,
  ControlNet), each from a small config;
* torch_geometric: every model of ``torch_geometric.nn.models`` that takes a plain graph, and the basic GNNs
  (GCN, GraphSAGE, GIN, GAT, PNA, EdgeCNN), on a random graph of 20 nodes; layers, pools and readouts in a
  small net each; the rows of :data:`PYG_ADDED`, added once the others had been used to build repairs, are
  held out.

Imports the libraries (and torch) when called, never at import.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

from benchmarks.zoo.suites import Case, imported_root

SMALL = ("atto", "femto", "pico", "nano", "xxs", "tiny", "xs", "small", "s", "mini", "b0", "18", "lite", "base")


def rows(suite: str) -> list[str]:
    return list(_ROWS[suite]())


class LibrarySuite:
    def __init__(self, suite: str) -> None:
        self.name = suite
        self.root = imported_root(suite)
        self.builder: Callable[[str, str], Case] = _BUILDERS[suite]

    def case(self, name: str, mode: str, dtype: str, profile: str) -> Case:
        return _built(lambda: self.builder(name, mode), mode)


def _built(make: Callable[[], Case], mode: str) -> Case:
    """A row made seeded and in ``mode``; its fallback, if it has one, the same way."""
    import torch

    torch.manual_seed(0)
    case = make()
    case.model = case.model.train() if mode == "train" else case.model.eval()
    if case.fallback is not None:
        fallback = case.fallback
        case.fallback = lambda: _built(fallback, mode)
    return case


# ---- torchvision

TV_DETECTION_SMALL = {"min_size": 128, "max_size": 160}
# the smallest inputs each family runs on: Inception's auxiliary head (training) needs 17x17 maps at Mixed_6e (its
# native 299), ViT-H/14's patches 14 pixels (56 = 4 x 14), S3D's last 7x7x2 pooling 224 pixels and 16
# frames, RAFT's correlation pyramid maps of 16 at 1/8 scale (128 pixels)
TV_SIZES = {"inception_v3": 299, "googlenet": 64, "maxvit_t": 224, "vit_b_16": 64, "vit_b_32": 64, "vit_l_16": 64,
            "vit_l_32": 64, "vit_h_14": 56}
TV_VIDEO = {"mvit_v1_b": (224, 16), "mvit_v2_s": (224, 16), "s3d": (224, 16)}  # (size, frames); others 64, 8
TV_FLOW_SIZE = 128


@functools.cache
def _tv_rows() -> tuple[str, ...]:
    from torchvision import models

    groups: dict[str, list[str]] = {}
    for name in models.list_models():
        module = models.get_model_builder(name).__module__
        if ".quantization" in module:  # quantized inference kernels, not a training target
            continue
        groups.setdefault(module, []).append(name)
    return tuple(_smallest(names) for _, names in sorted(groups.items()))


def _rank(name: str) -> tuple[int, int, str]:
    parts = re.split(r"[_\-.]", name.lower())
    for i, word in enumerate(SMALL):
        if word in parts or any(p.startswith(word) and p[len(word):].isdigit() for p in parts):
            return (0, i, name)
    digits = re.findall(r"\d+", name)
    return (1, int(digits[0]) if digits else 0, name)


def _smallest(names: list[str]) -> str:
    return min(names, key=lambda n: (_rank(n), len(n)))


def _tv_case(name: str, mode: str) -> Case:
    import torch
    from torchvision import models

    module = models.get_model_builder(name).__module__
    gen = torch.Generator().manual_seed(1)
    if ".detection" in module:
        return _tv_detection(name, mode, gen)
    if ".segmentation" in module:
        model = models.get_model(name, weights=None, weights_backbone=None, num_classes=5, aux_loss=False)
        return Case(model, args=(torch.randn(2, 3, 64, 64, generator=gen),), model_class=type(model).__name__)
    if ".video" in module:
        size, frames = TV_VIDEO.get(name, (64, 8))
        model = models.get_model(name, weights=None, num_classes=10)
        return Case(model, args=(torch.randn(1, 3, frames, size, size, generator=gen),),
                    model_class=type(model).__name__)
    if ".optical_flow" in module:
        model = models.get_model(name, weights=None)
        img = lambda: torch.randn(1, 3, TV_FLOW_SIZE, TV_FLOW_SIZE, generator=gen)  # noqa: E731
        return Case(model, args=(img(), img()), kwargs={"num_flow_updates": 3}, model_class=type(model).__name__)
    size = TV_SIZES.get(name, 64)
    kwargs: dict[str, Any] = {"num_classes": 10}
    if name.startswith("vit_"):
        kwargs["image_size"] = size
    if name in ("inception_v3", "googlenet"):
        kwargs["init_weights"] = True
    model = models.get_model(name, weights=None, **kwargs)
    return Case(model, args=(torch.randn(2, 3, size, size, generator=gen),), model_class=type(model).__name__,
                loss=_logits_loss)


def _logits_loss(out: Any) -> Any:
    """Classification: cross-entropy against fixed labels (GoogLeNet/Inception in training return aux logits too)."""
    import torch
    import torch.nn.functional as F

    logits = [t for t in (out if isinstance(out, tuple) else [out]) if isinstance(t, torch.Tensor)]
    if not logits and hasattr(out, "logits"):
        logits = [out.logits] + [t for t in (getattr(out, "aux_logits", None), getattr(out, "aux_logits2", None),
                                             getattr(out, "aux_logits1", None)) if t is not None]
    labels = torch.arange(logits[0].shape[0]) % logits[0].shape[-1]
    return sum(F.cross_entropy(t, labels) for t in logits), "labels"


def _tv_detection(name: str, mode: str, gen: Any) -> Case:
    import torch
    from torchvision import models

    kwargs: dict[str, Any] = {"weights": None, "weights_backbone": None, "num_classes": 5}
    if "keypoint" in name:
        kwargs["num_keypoints"] = 3
    if "ssd" not in name:
        kwargs.update(TV_DETECTION_SMALL)
    model = models.get_model(name, **kwargs)
    size = 128
    images = [torch.rand(3, size, size, generator=gen), torch.rand(3, size, size + 16, generator=gen)]
    if mode == "eval":
        return Case(model, args=(images,), model_class=type(model).__name__)
    targets = []
    for img in images:
        h, w = img.shape[1:]
        boxes = torch.tensor([[10.0, 12.0, 60.0, 70.0], [30.0, 20.0, 100.0, 90.0]])
        t: dict[str, Any] = {"boxes": boxes, "labels": torch.tensor([1, 3])}
        if "mask" in name:
            masks = torch.zeros(2, h, w, dtype=torch.uint8)
            masks[0, 12:70, 10:60] = 1
            masks[1, 20:90, 30:100] = 1
            t["masks"] = masks
        if "keypoint" in name:
            t["keypoints"] = torch.tensor([[[20.0, 30.0, 1.0], [40.0, 50.0, 1.0], [50.0, 60.0, 1.0]],
                                           [[50.0, 40.0, 1.0], [70.0, 60.0, 1.0], [90.0, 80.0, 1.0]]])
        targets.append(t)
    return Case(model, args=(images, targets), model_class=type(model).__name__, loss=_loss_dict)


def _loss_dict(out: Any) -> Any:
    return sum(v for _, v in sorted(out.items())), "labels"


# ---- timm

@functools.cache
def _timm_rows() -> tuple[str, ...]:
    import timm
    from timm.models import get_pretrained_cfg  # noqa: F401  (the registry is filled on import)
    from timm.models._registry import _model_to_module

    groups: dict[str, list[str]] = {}
    for name in timm.list_models():
        groups.setdefault(_model_to_module.get(name, name), []).append(name)
    return tuple(_smallest(names) for _, names in sorted(groups.items()))


def _timm_case(name: str, mode: str, small: bool = True) -> Case:
    """The model at 64 pixels where it takes an ``img_size`` or runs there; where that raises in eager (a patch
    size that does not divide 64, a stem that needs more), the fallback is the model at its own input size."""
    import timm
    import torch

    gen = torch.Generator().manual_seed(1)
    model, size = _timm_small(name) if small else (None, 0)
    if model is None:  # its default input size (capped at 64 where it runs there), or the fallback's own size
        model = timm.create_model(name, pretrained=False, num_classes=10)
        cfg = getattr(model, "pretrained_cfg", {}) or {}
        size = int((cfg.get("input_size") or (3, 224, 224))[-1])
        if small and not cfg.get("fixed_input_size"):
            size = min(size, 64)
    chans = int(getattr(model, "in_chans", 3) or 3) if isinstance(getattr(model, "in_chans", 3), int) else 3
    return Case(model, args=(torch.randn(2, chans, size, size, generator=gen),), model_class=type(model).__name__,
                loss=_logits_loss, fallback=(lambda: _timm_case(name, mode, small=False)) if small else None,
                note="" if small else f"at its own input size, {size} pixels")


def _timm_small(name: str) -> tuple[Any, int]:
    """The model built for 64 pixels (the multiple of its patch size below 64 where that does not divide it:
    14-pixel patches get 56), and that size; (None, 0) when it takes no ``img_size``."""
    import timm

    try:
        model = timm.create_model(name, pretrained=False, num_classes=10, img_size=64)
    except TypeError:
        return None, 0
    patch = next((m.patch_size for m in model.modules() if hasattr(m, "patch_size")), None)
    patch = patch[0] if isinstance(patch, (tuple, list)) else patch
    if isinstance(patch, int) and patch > 1 and 64 % patch:
        size = 64 // patch * patch
        return timm.create_model(name, pretrained=False, num_classes=10, img_size=size), size
    return model, 64


# ---- diffusers

DIFFUSERS_ROWS: dict[str, Callable[[], tuple[Any, dict[str, Any]]]] = {}


def _diffusers(name: str) -> Callable[[Callable[[], tuple[Any, dict[str, Any]]]], Any]:
    def add(fn: Callable[[], tuple[Any, dict[str, Any]]]) -> Any:
        DIFFUSERS_ROWS[name] = fn
        return fn

    return add


def _g() -> Any:
    import torch

    return torch.Generator().manual_seed(1)


@_diffusers("UNet2DModel")
def _unet2d() -> tuple[Any, dict[str, Any]]:
    import torch
    from diffusers import UNet2DModel

    m = UNet2DModel(sample_size=16, in_channels=3, out_channels=3, layers_per_block=1, block_out_channels=(32, 64),
                    down_block_types=("DownBlock2D", "AttnDownBlock2D"), up_block_types=("AttnUpBlock2D", "UpBlock2D"),
                    norm_num_groups=8)
    return m, {"sample": torch.randn(2, 3, 16, 16, generator=_g()), "timestep": torch.tensor([10, 20])}


@_diffusers("UNet2DConditionModel")
def _unet2d_cond() -> tuple[Any, dict[str, Any]]:
    import torch
    from diffusers import UNet2DConditionModel

    m = UNet2DConditionModel(sample_size=16, in_channels=4, out_channels=4, layers_per_block=1,
                             block_out_channels=(32, 64), down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
                             up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=32,
                             attention_head_dim=8, norm_num_groups=8)
    g = _g()
    return m, {"sample": torch.randn(2, 4, 16, 16, generator=g), "timestep": torch.tensor([10, 20]),
               "encoder_hidden_states": torch.randn(2, 6, 32, generator=g)}


@_diffusers("UNet1DModel")
def _unet1d() -> tuple[Any, dict[str, Any]]:
    import torch
    from diffusers import UNet1DModel

    # the Fourier time embedding adds 2 x block_out_channels[0] channels to the sample's
    m = UNet1DModel(sample_size=32, in_channels=2, out_channels=2, block_out_channels=(32, 32, 64),
                    extra_in_channels=64, layers_per_block=1)
    return m, {"sample": torch.randn(2, 2, 32, generator=_g()), "timestep": torch.tensor([10, 20])}


@_diffusers("AutoencoderKL")
def _vae() -> tuple[Any, dict[str, Any]]:
    import torch
    from diffusers import AutoencoderKL

    m = AutoencoderKL(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                      up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(32, 64), latent_channels=4,
                      norm_num_groups=8, layers_per_block=1)
    return m, {"sample": torch.randn(2, 3, 32, 32, generator=_g())}


@_diffusers("VQModel")
def _vq() -> tuple[Any, dict[str, Any]]:
    import torch
    from diffusers import VQModel

    m = VQModel(in_channels=3, out_channels=3, down_block_types=("DownEncoderBlock2D",) * 2,
                up_block_types=("UpDecoderBlock2D",) * 2, block_out_channels=(32, 64), latent_channels=4,
                norm_num_groups=8, layers_per_block=1, num_vq_embeddings=32)
    return m, {"sample": torch.randn(2, 3, 32, 32, generator=_g())}


@_diffusers("Transformer2DModel")
def _dit() -> tuple[Any, dict[str, Any]]:
    import torch
    from diffusers import Transformer2DModel

    m = Transformer2DModel(num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=8, num_layers=2,
                           sample_size=8, patch_size=2, num_embeds_ada_norm=1000, norm_type="ada_norm_zero")
    return m, {"hidden_states": torch.randn(2, 4, 8, 8, generator=_g()), "timestep": torch.tensor([10, 20]),
               "class_labels": torch.tensor([1, 2])}


@_diffusers("PixArtTransformer2DModel")
def _pixart() -> tuple[Any, dict[str, Any]]:
    import torch
    from diffusers import PixArtTransformer2DModel

    m = PixArtTransformer2DModel(num_attention_heads=2, attention_head_dim=16, in_channels=4, out_channels=8,
                                 num_layers=2, sample_size=8, patch_size=2, cross_attention_dim=32,
                                 caption_channels=24)
    g = _g()
    return m, {"hidden_states": torch.randn(2, 4, 8, 8, generator=g), "timestep": torch.tensor([10, 20]),
               "encoder_hidden_states": torch.randn(2, 5, 24, generator=g),
               "added_cond_kwargs": {"resolution": None, "aspect_ratio": None}}


@_diffusers("SD3Transformer2DModel")
def _sd3() -> tuple[Any, dict[str, Any]]:
    import torch
    from diffusers import SD3Transformer2DModel

    m = SD3Transformer2DModel(sample_size=8, patch_size=2, in_channels=4, num_layers=2, attention_head_dim=8,
                              num_attention_heads=4, joint_attention_dim=32, caption_projection_dim=32,
                              pooled_projection_dim=16, out_channels=4, pos_embed_max_size=16)
    g = _g()
    return m, {"hidden_states": torch.randn(2, 4, 8, 8, generator=g),
               "encoder_hidden_states": torch.randn(2, 5, 32, generator=g),
               "pooled_projections": torch.randn(2, 16, generator=g), "timestep": torch.tensor([10, 20])}


@_diffusers("FluxTransformer2DModel")
def _flux() -> tuple[Any, dict[str, Any]]:
    import torch
    from diffusers import FluxTransformer2DModel

    m = FluxTransformer2DModel(patch_size=1, in_channels=4, num_layers=1, num_single_layers=1, attention_head_dim=16,
                               num_attention_heads=2, joint_attention_dim=32, pooled_projection_dim=32,
                               axes_dims_rope=(4, 6, 6))
    g = _g()
    return m, {"hidden_states": torch.randn(1, 16, 4, generator=g),
               "encoder_hidden_states": torch.randn(1, 5, 32, generator=g),
               "pooled_projections": torch.randn(1, 32, generator=g), "timestep": torch.tensor([0.5]),
               "img_ids": torch.zeros(16, 3), "txt_ids": torch.zeros(5, 3)}


@_diffusers("ControlNetModel")
def _controlnet() -> tuple[Any, dict[str, Any]]:
    import torch
    from diffusers import ControlNetModel

    m = ControlNetModel(in_channels=4, layers_per_block=1, block_out_channels=(32, 64),
                        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"), cross_attention_dim=32,
                        attention_head_dim=8, norm_num_groups=8, conditioning_embedding_out_channels=(8, 16))
    g = _g()
    return m, {"sample": torch.randn(2, 4, 16, 16, generator=g), "timestep": torch.tensor([10, 20]),
               "encoder_hidden_states": torch.randn(2, 6, 32, generator=g),
               "controlnet_cond": torch.randn(2, 3, 32, 32, generator=g)}  # halved per conditioning block


@_diffusers("UNetMotionModel")
def _motion() -> tuple[Any, dict[str, Any]]:
    import torch
    from diffusers import UNetMotionModel

    m = UNetMotionModel(block_out_channels=(32, 64), layers_per_block=1, norm_num_groups=8,
                        down_block_types=("CrossAttnDownBlockMotion", "DownBlockMotion"),
                        up_block_types=("UpBlockMotion", "CrossAttnUpBlockMotion"), cross_attention_dim=32,
                        num_attention_heads=4, in_channels=4, out_channels=4, motion_max_seq_length=8)
    g = _g()
    return m, {"sample": torch.randn(1, 4, 4, 16, 16, generator=g), "timestep": torch.tensor([10]),
               "encoder_hidden_states": torch.randn(4, 6, 32, generator=g)}


def _diffusers_case(name: str, mode: str) -> Case:
    model, kwargs = DIFFUSERS_ROWS[name]()
    return Case(model, kwargs=kwargs, model_class=type(model).__name__)


# ---- torch_geometric

PYG_CONVS = ("GCN", "GraphSAGE", "GIN", "GAT", "PNA", "EdgeCNN")


def _pyg_rows() -> tuple[str, ...]:
    return (*PYG_CONVS, "GATv2", "GAT-edge", "GraphUNet", "SchNet", "DimeNetPlusPlus", "AttentiveFP", "MLP", "GAE",
            *_LAYER_ROWS, *PYG_ADDED)


def _graph(nodes: int = 20, features: int = 8, edges: int = 60) -> tuple[Any, Any, Any]:
    import torch

    g = torch.Generator().manual_seed(1)
    x = torch.randn(nodes, features, generator=g)
    src = torch.randint(0, nodes, (edges,), generator=g)
    dst = (src + torch.randint(1, nodes, (edges,), generator=g)) % nodes
    edge_index = torch.stack([src, dst])
    batch = torch.arange(nodes) * 2 // nodes  # two graphs
    return x, edge_index, batch


def _pyg_case(name: str, mode: str) -> Case:
    import torch
    from torch_geometric import nn as gnn

    x, ei, batch = _graph()
    n_nodes = x.shape[0]
    if name in PYG_CONVS or name == "GATv2":
        cls = getattr(gnn.models, "GAT" if name == "GATv2" else name)
        kw: dict[str, Any] = {"in_channels": 8, "hidden_channels": 16, "num_layers": 2, "out_channels": 4}
        if name == "GATv2":
            kw["v2"] = True
        if name == "PNA":
            deg = torch.bincount(torch.bincount(ei[1], minlength=n_nodes))
            kw.update(aggregators=["mean", "min", "max", "std"], scalers=["identity", "amplification"], deg=deg)
        model = cls(**kw)
        return Case(model, args=(x, ei), model_class=cls.__name__)
    if name == "GAT-edge":
        model = gnn.models.GAT(8, 16, 2, 4, edge_dim=3)
        return Case(model, args=(x, ei), kwargs={"edge_attr": torch.randn(ei.shape[1], 3)}, model_class="GAT")
    if name == "GraphUNet":
        model = gnn.models.GraphUNet(8, 16, 4, depth=2)
        return Case(model, args=(x, ei), model_class="GraphUNet")
    if name in ("SchNet", "DimeNetPlusPlus"):
        z = torch.randint(1, 10, (n_nodes,))
        pos = torch.randn(n_nodes, 3)
        if name == "SchNet":
            model = gnn.models.SchNet(hidden_channels=16, num_filters=16, num_interactions=2, num_gaussians=10,
                                      cutoff=5.0)
        else:
            model = gnn.models.DimeNetPlusPlus(hidden_channels=16, out_channels=1, num_blocks=2, int_emb_size=8,
                                               basis_emb_size=4, out_emb_channels=16, num_spherical=3, num_radial=4)
        return Case(model, args=(z, pos, batch), model_class=type(model).__name__)
    if name == "AttentiveFP":
        model = gnn.models.AttentiveFP(8, 16, 4, edge_dim=3, num_layers=2, num_timesteps=2)
        return Case(model, args=(x, ei, torch.randn(ei.shape[1], 3), batch), model_class="AttentiveFP")
    if name == "MLP":
        model = gnn.models.MLP([8, 16, 4], dropout=0.1)
        return Case(model, args=(x,), kwargs={"batch": batch}, model_class="MLP")
    if name == "GAE":
        model = gnn.models.GAE(gnn.models.GCN(8, 16, 2, 8))
        return Case(_Recon(model, ei), args=(x, ei), model_class="GAE")
    if name in _PYG_LAYERS:
        model = _PYG_LAYERS[name]()
        return Case(model, args=(x, ei, batch), model_class=type(model).__name__)
    raise KeyError(f"unknown torch_geometric row {name!r}")


def _recon_cls() -> Any:
    from torch import nn

    class Recon(nn.Module):
        """GAE: encode, then the reconstruction loss over positive edges and sampled negatives."""

        def __init__(self, gae: Any, ei: Any) -> None:
            super().__init__()
            self.gae = gae

        def forward(self, x: Any, edge_index: Any) -> Any:
            z = self.gae.encode(x, edge_index)
            return self.gae.recon_loss(z, edge_index)

    return Recon


def _Recon(gae: Any, ei: Any) -> Any:  # noqa: N802
    return _recon_cls()(gae, ei)


def _layer_net(make_conv: Callable[[], Any], post: Callable[[Any, Any, Any], Any] | None = None,
               name: str = "Net", make_pool: Callable[[], Any] | None = None) -> Any:
    from torch import nn

    class Net(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = make_conv()
            self.lin = nn.Linear(16, 4)
            if make_pool is not None:  # built here: a module built in forward breaks the graph in its constructor
                self.pool = make_pool()

        def forward(self, x: Any, edge_index: Any, batch: Any) -> Any:
            h = self.conv(x, edge_index)
            h = h[0] if isinstance(h, tuple) else h
            if post is not None:
                return post(self, h, (edge_index, batch))
            return self.lin(h.relu())

    Net.__name__ = Net.__qualname__ = name
    return Net()


def _pooled(net: Any, h: Any, rest: Any) -> Any:
    from torch_geometric import nn as gnn

    edge_index, batch = rest
    h, edge_index, _, batch, _, _ = net.pool(h, edge_index, batch=batch)
    return net.lin(gnn.global_mean_pool(h, batch))


def _pool_net(pool_cls: str) -> Any:
    from torch_geometric import nn as gnn

    return _layer_net(lambda: gnn.GCNConv(8, 16), _pooled, make_pool=lambda: getattr(gnn, pool_cls)(16, ratio=0.5))


def _layers() -> dict[str, Callable[[], Any]]:
    from torch_geometric import nn as gnn

    def pools(net: Any, h: Any, rest: Any) -> Any:
        _, batch = rest
        return net.lin(gnn.global_mean_pool(h, batch) + gnn.global_max_pool(h, batch) + gnn.global_add_pool(h, batch))

    def knn(net: Any, h: Any, rest: Any) -> Any:
        _, batch = rest
        ei = gnn.knn_graph(h, k=3, batch=batch)
        return net.lin(gnn.global_mean_pool(h, batch)) + ei.shape[1] * 0

    rows = {
        "GPSConv": lambda: _layer_net(lambda: _GPS()),
        "TransformerConv": lambda: _layer_net(lambda: gnn.TransformerConv(8, 8, heads=2)),
        "SGConv": lambda: _layer_net(lambda: gnn.SGConv(8, 16, K=2)),
        "APPNP": lambda: _layer_net(lambda: _Seq(gnn.APPNP(K=3, alpha=0.1))),
        "ChebConv": lambda: _layer_net(lambda: gnn.ChebConv(8, 16, K=3)),
        "GatedGraphConv": lambda: _layer_net(lambda: gnn.GatedGraphConv(16, num_layers=2)),
        "EdgeConv-dynamic": lambda: _layer_net(lambda: gnn.DynamicEdgeConv(_mlp(16, 16), k=4)),
        "global_pools": lambda: _layer_net(lambda: gnn.GCNConv(8, 16), pools),
        "TopKPooling": lambda: _pool_net("TopKPooling"),
        "SAGPooling": lambda: _pool_net("SAGPooling"),
        "knn_graph": lambda: _layer_net(lambda: gnn.GCNConv(8, 16), knn),
        "RGCN": lambda: _layer_net(lambda: _RGCN()),
        "DeepGCNLayer": lambda: _layer_net(lambda: _DeepGCN()),
        "JumpingKnowledge": lambda: _layer_net(lambda: _JK()),
        "LINKX": lambda: _layer_net(lambda: _Lin16(gnn.models.LINKX(20, 8, 16, 16, num_layers=2))),
        "DeepGraphInfomax": lambda: _layer_net(lambda: _DGI()),
    }
    rows.update(_added())
    return {k: (lambda make=make, k=k: _named(make(), k)) for k, make in rows.items()}


def _named(net: Any, name: str) -> Any:
    type(net).__name__ = type(net).__qualname__ = name.replace("-", "_") + "Net"
    return net


# rows added after the first 30 had been used to build repairs: all held out (benchmarks/corpus/held_out.json)
PYG_ADDED = ("ResGatedGraphConv", "TAGConv", "ARMAConv", "FeaStConv", "SuperGATConv", "LEConv", "ClusterGCNConv",
               "GeneralConv", "FiLMConv", "MFConv", "EGConv", "HypergraphConv", "GINEConv", "SortAggregation",
               "EdgePooling")


def _added() -> dict[str, Callable[[], Any]]:
    from torch_geometric import nn as gnn

    def sort_readout(net: Any, h: Any, rest: Any) -> Any:
        _, batch = rest
        return net.lin(net.pool(h, batch).view(-1, 4, 16).mean(1))

    def edge_pooled(net: Any, h: Any, rest: Any) -> Any:
        edge_index, batch = rest
        h, edge_index, batch, _ = net.pool(h, edge_index, batch)
        return net.lin(gnn.global_mean_pool(h, batch))

    return {
        "ResGatedGraphConv": lambda: _layer_net(lambda: gnn.ResGatedGraphConv(8, 16)),
        "TAGConv": lambda: _layer_net(lambda: gnn.TAGConv(8, 16, K=2)),
        "ARMAConv": lambda: _layer_net(lambda: gnn.ARMAConv(8, 16, num_stacks=2, num_layers=2, dropout=0.1)),
        "FeaStConv": lambda: _layer_net(lambda: gnn.FeaStConv(8, 16, heads=2)),
        "SuperGATConv": lambda: _layer_net(lambda: gnn.SuperGATConv(8, 8, heads=2)),
        "LEConv": lambda: _layer_net(lambda: gnn.LEConv(8, 16)),
        "ClusterGCNConv": lambda: _layer_net(lambda: gnn.ClusterGCNConv(8, 16)),
        "GeneralConv": lambda: _layer_net(lambda: gnn.GeneralConv(8, 16)),
        "FiLMConv": lambda: _layer_net(lambda: gnn.FiLMConv(8, 16)),
        "MFConv": lambda: _layer_net(lambda: gnn.MFConv(8, 16)),
        "EGConv": lambda: _layer_net(lambda: _Seq(gnn.EGConv(16, 16, num_heads=4, num_bases=2))),
        "HypergraphConv": lambda: _layer_net(lambda: gnn.HypergraphConv(8, 16)),
        "GINEConv": lambda: _layer_net(lambda: _GINE()),
        "SortAggregation": lambda: _layer_net(lambda: gnn.GCNConv(8, 16), sort_readout,
                                              make_pool=lambda: gnn.aggr.SortAggregation(k=4)),
        "EdgePooling": lambda: _layer_net(lambda: gnn.GCNConv(8, 16), edge_pooled,
                                          make_pool=lambda: gnn.EdgePooling(16)),
    }


def _GINE() -> Any:  # noqa: N802
    import torch
    from torch_geometric import nn as gnn

    def init(m: Any) -> None:
        m.conv = gnn.GINEConv(_mlp(8, 16), edge_dim=3)

    return _module(lambda m, x, ei: m.conv(x, ei, torch.ones(ei.shape[1], 3)), init)


_LAYER_ROWS = ("GPSConv", "TransformerConv", "SGConv", "APPNP", "ChebConv", "GatedGraphConv", "EdgeConv-dynamic",
               "global_pools", "TopKPooling", "SAGPooling", "knn_graph", "RGCN", "DeepGCNLayer", "JumpingKnowledge",
               "LINKX", "DeepGraphInfomax")


def _mlp(a: int, b: int) -> Any:
    from torch import nn

    return nn.Sequential(nn.Linear(a, b), nn.ReLU(), nn.Linear(b, b))


def _module(forward: Callable[..., Any], init: Callable[[Any], None]) -> Any:
    from torch import nn

    class M(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            init(self)

        def forward(self, x: Any, edge_index: Any) -> Any:
            return forward(self, x, edge_index)

    return M()


def _GPS() -> Any:  # noqa: N802
    from torch import nn
    from torch_geometric import nn as gnn

    def init(m: Any) -> None:
        m.inp = nn.Linear(8, 16)
        m.gps = gnn.GPSConv(16, gnn.GINConv(nn.Sequential(nn.Linear(16, 16), nn.ReLU())), heads=2)

    return _module(lambda m, x, ei: m.gps(m.inp(x), ei), init)


def _Seq(prop: Any) -> Any:  # noqa: N802
    from torch import nn

    def init(m: Any) -> None:
        m.lin, m.prop = nn.Linear(8, 16), prop

    return _module(lambda m, x, ei: m.prop(m.lin(x), ei), init)


def _RGCN() -> Any:  # noqa: N802
    import torch
    from torch_geometric import nn as gnn

    def init(m: Any) -> None:
        m.conv = gnn.RGCNConv(8, 16, num_relations=3)

    return _module(lambda m, x, ei: m.conv(x, ei, torch.arange(ei.shape[1]) % 3), init)


def _DeepGCN() -> Any:  # noqa: N802
    from torch import nn
    from torch_geometric import nn as gnn

    def init(m: Any) -> None:
        m.inp = nn.Linear(8, 16)
        m.layer = gnn.DeepGCNLayer(gnn.GENConv(16, 16), nn.LayerNorm(16), nn.ReLU(), block="res+", dropout=0.1)

    return _module(lambda m, x, ei: m.layer(m.inp(x), ei), init)


def _JK() -> Any:  # noqa: N802
    from torch_geometric import nn as gnn

    def init(m: Any) -> None:
        m.c1, m.c2, m.jk = gnn.GCNConv(8, 16), gnn.GCNConv(16, 16), gnn.JumpingKnowledge("lstm", 16, 2)

    def fwd(m: Any, x: Any, ei: Any) -> Any:
        h1 = m.c1(x, ei).relu()
        return m.jk([h1, m.c2(h1, ei)])

    return _module(fwd, init)


def _Lin16(model: Any) -> Any:  # noqa: N802
    def init(m: Any) -> None:
        m.model = model

    def fwd(m: Any, x: Any, ei: Any) -> Any:
        try:
            return m.model(x, ei)
        except TypeError:
            return m.model(None, x, ei)

    return _module(fwd, init)


def _DGI() -> Any:  # noqa: N802
    import torch
    from torch_geometric import nn as gnn

    def init(m: Any) -> None:
        enc = gnn.GCNConv(8, 16)
        m.dgi = gnn.DeepGraphInfomax(16, encoder=lambda x, ei: enc(x, ei).relu(),
                                     summary=lambda z, *a, **k: torch.sigmoid(z.mean(dim=0)),
                                     corruption=lambda x, ei: (x[torch.randperm(x.size(0))], ei))
        m.enc = enc

    def fwd(m: Any, x: Any, ei: Any) -> Any:
        pos, neg, s = m.dgi(x, ei)
        return pos + m.dgi.loss(pos, neg, s)

    return _module(fwd, init)


_PYG_LAYERS: dict[str, Callable[[], Any]] = {}


def _pyg_build(name: str, mode: str) -> Case:
    if not _PYG_LAYERS:
        _PYG_LAYERS.update(_layers())
    return _pyg_case(name, mode)


_ROWS: dict[str, Callable[[], tuple[str, ...] | list[str]]] = {
    "torchvision": _tv_rows, "timm": _timm_rows, "diffusers": lambda: tuple(DIFFUSERS_ROWS),
    "torch_geometric": _pyg_rows,
}
_BUILDERS: dict[str, Callable[[str, str], Case]] = {
    "torchvision": _tv_case, "timm": _timm_case, "diffusers": _diffusers_case, "torch_geometric": _pyg_build,
}
