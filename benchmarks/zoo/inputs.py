"""Generate a model's inputs from its forward signature and its config.

Text ids (avoiding every special token id of the config) with an attention mask, decoder ids for
encoder-decoders, pixel values sized from the (vision) config, audio features or raw waveforms, and for
multimodal models the image tokens the model expects, as many as its vision tower produces per image
(counted by running ``get_image_features`` once). Only the required parameters and the common optional
ones above are filled; a required parameter that cannot be generated raises :class:`InputError`.
A family's input hook (``benchmarks.zoo.families``) edits the result where the generic rules are wrong.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

from benchmarks.zoo.profiles import Profile
from benchmarks.zoo.specs import ModelSpec, family

IMAGE_TOKEN_ATTRS = ("image_token_index", "image_token_id")
# the modality of each token (transformers 5's mm_token_type_ids): 1 image, 2 video, 3 audio, else 0 (text)
MODALITY_TOKEN_ATTRS = {1: IMAGE_TOKEN_ATTRS, 2: ("video_token_index", "video_token_id"),
                        3: ("audio_token_index", "audio_token_id")}
SUB_CONFIGS = ("text_config", "decoder", "vision_config", "audio_config", "encoder", "text_encoder",
               "speech_config", "encoder_config", "backbone_config")


class InputError(Exception):
    """A required forward parameter the generator cannot fill."""


def params(model: Any) -> dict[str, inspect.Parameter]:
    sig = inspect.signature(model.forward)
    return {n: p for n, p in sig.parameters.items() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}


def required(model: Any) -> list[str]:
    return [n for n, p in params(model).items() if p.default is inspect.Parameter.empty]


def config_attr(config: Any, *names: str, default: Any = None) -> Any:
    """The first of ``names`` set on the config, else on its sub-configs (text, vision, audio, encoder...)."""
    for cfg in (config, *(getattr(config, s, None) for s in SUB_CONFIGS)):
        if cfg is None or isinstance(cfg, dict):
            continue
        for n in names:
            v = getattr(cfg, n, None)
            if v is not None:
                return v
    return default


def special_ids(config: Any) -> set[int]:
    from benchmarks.zoo.shrink import token_ids

    return token_ids(config.to_dict())


def text_vocab(config: Any) -> int | None:
    v = config_attr(config, "vocab_size")
    return int(v) if isinstance(v, int) and v > 0 else None


def token_ids(config: Any, shape: tuple[int, ...], gen: Any) -> Any:
    """Random ids below the text vocabulary that are no special token (mapped onto the allowed ids)."""
    import torch

    vocab = text_vocab(config) or 100
    specials = special_ids(config)
    allowed = torch.tensor([i for i in range(min(3, vocab - 1), vocab) if i not in specials] or [vocab - 1])
    return allowed[torch.randint(0, len(allowed), shape, generator=gen)]


def _pair(v: Any) -> tuple[int, int]:
    if isinstance(v, (list, tuple)):
        return int(v[0]), int(v[-1])
    return int(v), int(v)


def pixel_values(config: Any, p: Profile, batch: int, gen: Any) -> Any:
    """(batch, channels, height, width), or (batch, frames, channels, height, width) for video models."""
    import torch

    channels = config_attr(config, "num_channels", "in_channels", "input_channels", default=3)
    channels = channels if isinstance(channels, int) else 3
    size = _pair(config_attr(config, "image_size", default=p.image))
    frames = config_attr(config, "num_frames")
    lead = (batch, frames) if isinstance(frames, int) else (batch,)
    return torch.randn(*lead, channels, *size, generator=gen)


def image_sizes(pixels: Any) -> Any:
    import torch

    return torch.tensor([list(pixels.shape[-2:])] * pixels.shape[0])


def audio_features(config: Any, p: Profile, batch: int, gen: Any) -> Any:
    """Spectrogram-like features: (batch, mel bins, frames) for Whisper-style, else (batch, frames, features)."""
    import torch

    mels = config_attr(config, "num_mel_bins")
    if mels:
        positions = config_attr(config, "max_source_positions")
        frames = 2 * positions if positions else p.audio_frames
        return torch.randn(batch, mels, frames, generator=gen)
    per_channel = config_attr(config, "input_feat_per_channel")
    if per_channel:
        feats = per_channel * (config_attr(config, "input_channels", default=1) or 1)
    else:
        feats = config_attr(config, "feature_projection_input_dim", "input_dim", "feature_size", default=80)
    return torch.randn(batch, p.audio_frames, feats, generator=gen)


def audio_values(config: Any, p: Profile, batch: int, gen: Any) -> Any:
    import torch

    channels = config_attr(config, "audio_channels")
    shape = (batch, channels, p.audio_samples) if channels else (batch, p.audio_samples)
    return torch.randn(*shape, generator=gen)


def boxes(shape: tuple[int, ...], gen: Any) -> Any:
    """Layout boxes (x0, y0, x1, y1) on a 0-1000 page, one per token, each with x0 <= x1 and y0 <= y1."""
    import torch

    a = torch.randint(0, 500, (*shape, 2), generator=gen)
    return torch.cat([a, a + torch.randint(0, 500, (*shape, 2), generator=gen)], dim=-1)


def _token(config: Any, attrs: tuple[str, ...]) -> int | None:
    for a in attrs:
        v = getattr(config, a, None)
        if isinstance(v, int):
            return v
    return None


def image_token(config: Any) -> int | None:
    return _token(config, IMAGE_TOKEN_ATTRS)


def modality_types(config: Any, ids: Any) -> Any:
    """The modality of each text id: 0 text, else the kind of the special token it is (image, video, audio)."""
    import torch

    types = torch.zeros_like(ids)
    for kind, attrs in MODALITY_TOKEN_ATTRS.items():
        token = _token(config, attrs)
        if token is not None:
            types[ids == token] = kind
    return types


def _image_features_fn(model: Any) -> Any:
    """``get_image_features`` of the model, or of its inner model (task heads wrap the base model)."""
    for m in (model, getattr(model, "model", None)):
        fn = getattr(m, "get_image_features", None)
        if callable(fn):
            return fn
    return None


def _required_by_image_features(model: Any) -> set[str]:
    fn = _image_features_fn(model)
    if fn is None:
        return set()
    return {n for n, p in inspect.signature(fn).parameters.items() if p.default is inspect.Parameter.empty}


def image_features(result: Any) -> Any:
    """The image features ``get_image_features`` returned: the result itself, or from the model output it
    returns in transformers 5 (the vision tower's), its ``pooler_output`` (where the model puts the projected
    features) else its ``last_hidden_state`` (Llama 4)."""
    for name in ("pooler_output", "last_hidden_state"):
        if getattr(result, name, None) is not None:
            return getattr(result, name)
    return result


def image_feature_counts(model: Any, config: Any, inputs: dict[str, Any]) -> list[int]:
    """Tokens each image becomes, from one call of the model's ``get_image_features`` (its other required
    arguments from the inputs or, by name, from the config: ``vision_feature_layer``...)."""
    import torch

    fn = _image_features_fn(model)
    kwargs = {}
    for name, prm in inspect.signature(fn).parameters.items():
        if name in inputs:
            kwargs[name] = inputs[name]
        elif prm.default is inspect.Parameter.empty and prm.kind not in (prm.VAR_POSITIONAL, prm.VAR_KEYWORD):
            kwargs[name] = config_attr(config, name)
    with torch.no_grad():
        feats = image_features(fn(**kwargs))
    return feature_counts(feats, int(inputs["pixel_values"].shape[0]))


def feature_counts(feats: Any, images: int) -> list[int]:
    """Tokens per image of image features: one tensor per image, or one tensor for all of them."""
    if isinstance(feats, (list, tuple)):  # one tensor per image: (tokens, dim)
        return [int(f.shape[0] if f.dim() == 2 else math.prod(f.shape[-3:-1]) if f.dim() == 4 else f.shape[-2])
                for f in feats]
    if feats.dim() >= 3:  # (images, ..., dim): every middle dimension is tokens
        return [math.prod(feats.shape[1:-1])] * int(feats.shape[0])
    return [int(feats.shape[0]) // images] * images


def with_image_tokens(ids: Any, token: int, counts: list[int]) -> Any:
    """Text ids with ``counts[i]`` image tokens after the first token of row i (rows grow to fit)."""
    import torch

    rows = []
    for row, n in zip(ids, counts):
        rows.append(torch.cat([row[:1], torch.full((n,), token, dtype=row.dtype), row[1:]]))
    return torch.stack(rows)


def cache_lacks_attention(config: Any) -> bool:
    """Whether the cache transformers 5 builds from the decoder's layer kinds has no attention layer (a Mamba-only
    Bamba or Jamba): its causal mask asks the cache for a sequence length, which only attention layers keep, and
    fails. Such a model runs without a cache. (transformers 4 has no per-layer cache kinds.)"""
    try:
        from transformers.cache_utils import DYNAMIC_LAYER_TYPE_MAPPING, CacheLayerMixin, get_layer_types_and_kwargs
    except ImportError:
        return False
    kinds, _ = get_layer_types_and_kwargs(config.get_text_config(decoder=True))
    return not any(issubclass(DYNAMIC_LAYER_TYPE_MAPPING.get(k, CacheLayerMixin), CacheLayerMixin) for k in kinds)


def make_inputs(model: Any, config: Any, spec: ModelSpec, p: Profile, dtype: Any = None, seed: int = 1) -> dict[str, Any]:
    """Keyword inputs for ``model(**inputs)``."""
    import torch

    gen = torch.Generator().manual_seed(seed)
    fam = family(spec.model_type)
    sizes = {"batch": p.batch, "seq": p.seq, "decoder_seq": p.decoder_seq, **fam.sizes, **dict(spec.inputs)}
    batch = sizes["batch"]
    names = params(model)
    need = set(required(model))
    out: dict[str, Any] = {}
    if "input_ids" in names:
        out["input_ids"] = token_ids(config, (batch, sizes["seq"]), gen)
    vision = image_token(config) is not None or config_attr(config, "image_size") is not None
    if "pixel_values" in names and ("pixel_values" in need or "input_ids" not in out or vision):
        out["pixel_values"] = pixel_values(config, p, batch, gen)
        if "image_sizes" in names and "image_sizes" in _required_by_image_features(model):
            out["image_sizes"] = image_sizes(out["pixel_values"])
    if "input_features" in names:
        out["input_features"] = audio_features(config, p, batch, gen)
    if "input_values" in names:
        out["input_values"] = audio_values(config, p, batch, gen)
    if getattr(config, "is_encoder_decoder", False) and "decoder_input_ids" in names:
        out["decoder_input_ids"] = token_ids(config, (batch, sizes["decoder_seq"]), gen)
    hook_args = dict(model=model, config=config, profile=p, gen=gen, sizes=sizes)
    if fam.pre_inputs is not None:
        out = fam.pre_inputs(out, **hook_args)
    if dtype is not None:
        out = {k: v.to(dtype) if v.is_floating_point() else v for k, v in out.items()}
    token = image_token(config)
    if token is not None and "input_ids" in out and "pixel_values" in out and _image_features_fn(model):
        counts = (fam.image_tokens or image_feature_counts)(model, config, out)
        out["input_ids"] = with_image_tokens(out["input_ids"], token, counts)
    if "bbox" in names and "input_ids" in out:
        out["bbox"] = boxes(out["input_ids"].shape, gen)
    if "attention_mask" in names and "input_ids" in out:
        out["attention_mask"] = torch.ones_like(out["input_ids"])
    if "use_cache" in names and cache_lacks_attention(config):
        out["use_cache"] = False
    if "mm_token_type_ids" in names and "input_ids" in out:
        out["mm_token_type_ids"] = modality_types(config, out["input_ids"])
    if fam.inputs is not None:
        out = fam.inputs(out, **hook_args)
    missing = [n for n in need if n not in out]
    if missing:
        raise InputError(f"cannot generate required input(s) {', '.join(missing)}")
    if dtype is not None:
        out = {k: v.to(dtype) if torch.is_tensor(v) and v.is_floating_point() else v for k, v in out.items()}
    return out
