"""Build a zoo model: spec -> shrunk config -> model class -> model with random weights (no downloads).

Imports transformers (and through it torch) when called, never at module import.
"""

from __future__ import annotations

import functools
import inspect
import os
from typing import Any

from benchmarks.zoo.profiles import Profile, profile
from benchmarks.zoo.shrink import apply_overrides, is_subconfig, shrink
from benchmarks.zoo.specs import ModelSpec, family

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# where a model type has no base model (MODEL_MAPPING), the task heads tried in this order, then any other; a
# head the installed transformers lacks is skipped (VISION_2_SEQ became MULTIMODAL_LM in transformers 5)
HEAD_ORDER = (
    "CAUSAL_LM", "IMAGE_TEXT_TO_TEXT", "VISION_2_SEQ", "MULTIMODAL_LM", "SEQ_TO_SEQ_CAUSAL_LM", "SPEECH_SEQ_2_SEQ",
    "TEXT_TO_WAVEFORM", "TEXT_TO_SPECTROGRAM", "DEPTH_ESTIMATION", "SEMANTIC_SEGMENTATION",
    "UNIVERSAL_SEGMENTATION", "KEYPOINT_DETECTION", "BACKBONE", "IMAGE", "OBJECT_DETECTION", "MASK_GENERATION",
    "PRETRAINING", "MASKED_LM",
)

DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def model_class_name(model_type: str) -> str:
    """The base model class of a type (``MODEL_MAPPING``), else its first task head in :data:`HEAD_ORDER`."""
    from transformers.models.auto import modeling_auto as auto

    fam = family(model_type)
    if fam.model_class:
        return fam.model_class
    mappings = [("", auto.MODEL_MAPPING_NAMES)]
    mappings += [(h, getattr(auto, f"MODEL_FOR_{h}_MAPPING_NAMES", {})) for h in HEAD_ORDER]
    mappings += sorted((n, getattr(auto, n)) for n in dir(auto) if n.startswith("MODEL_FOR_") and n.endswith("_NAMES"))
    for _, names in mappings:
        name = names.get(model_type)
        if name:
            return name[0] if isinstance(name, (tuple, list)) else name
    raise LookupError(f"no model class for model type {model_type!r}")


def default_config(model_type: str) -> Any:
    """The default config of a type; composite types without defaults get their parts from the family table."""
    from transformers import CONFIG_MAPPING

    fam = family(model_type)
    return CONFIG_MAPPING[model_type](**(fam.base_config() if fam.base_config is not None else {}))


def config_dict(spec: ModelSpec, p: Profile, base: Any = None) -> dict[str, Any]:
    """The shrunk config dict of a spec: a config (the defaults unless ``base``) -> generic shrinker -> what
    ``__init__`` takes -> family overrides -> variant overrides (overrides may add attributes a config class
    does not declare)."""
    config = base if base is not None else default_config(spec.model_type)
    d = init_kwargs(shrink(config.to_dict(), p), config)
    apply_overrides(d, family(spec.model_type).config)
    return apply_overrides(d, dict(spec.config))


# what a backbone config takes whatever its signature says (transformers 5 takes it as a private field or a
# keyword its __post_init__ reads); passed back where set
BACKBONE_OUTPUTS = frozenset({"out_features", "out_indices"})


@functools.cache
def _init_params(cls: type) -> frozenset[str]:
    return frozenset(inspect.signature(cls.__init__).parameters)


def init_kwargs(d: dict[str, Any], config: Any) -> dict[str, Any]:
    """What to pass back to ``config``'s class (``d`` is its shrunk dict): its own ``__init__`` parameters, the
    :data:`BACKBONE_OUTPUTS` that are set, and PretrainedConfig's attributes where they differ from
    PretrainedConfig's defaults, likewise in every sub-config of the same type (one of another type, a timm
    backbone replaced, is passed whole). What a config computes in ``__init__`` (``stage_names``,
    ``qk_head_dim``...) is dropped: passed back, the value computed from the original sizes would win over the
    one from the shrunk sizes."""
    from transformers import PretrainedConfig

    base = _base_attributes()
    params = _init_params(type(config))
    out = {}
    for k, v in d.items():
        # only sub-configs are read from the config (transformers 5 raises on a per-layer attribute read whole)
        sub = getattr(config, k, None) if is_subconfig(v) else None
        if isinstance(sub, PretrainedConfig) and sub.model_type == v["model_type"]:
            out[k] = init_kwargs(v, sub)
        elif k in params or k == "model_type" or is_subconfig(v) or (k in base and base[k] != v):
            out[k] = v
        elif k in BACKBONE_OUTPUTS and v is not None:
            out[k] = v
    return out


@functools.cache
def _base_attributes() -> dict[str, Any]:
    from transformers import PretrainedConfig

    return PretrainedConfig().to_dict()


def build_config(spec: ModelSpec, p: Profile | str = "tiny") -> Any:
    """The config object of a spec. Shrinks twice: sub-configs that a config creates only in ``__init__``
    (a DETR's default ResNet backbone once timm is switched off) are shrunk in the second pass."""
    from transformers import CONFIG_MAPPING

    p = profile(p) if isinstance(p, str) else p
    cls = CONFIG_MAPPING[spec.model_type]
    config = cls(**config_dict(spec, p))  # not from_dict: it logs the config's repr, which fails for some types
    return cls(**config_dict(spec, p, config))


def torch_dtype(name: str) -> Any:
    import torch

    try:
        return getattr(torch, DTYPES[name])
    except KeyError:
        raise ValueError(f"unknown dtype {name!r}; choose from {', '.join(DTYPES)}") from None


def as_config_class(name: str | None, config: Any) -> Any:
    """``config`` as an instance of the named config class (the same settings), where a family names one."""
    import transformers

    own = getattr(transformers, name) if name else None
    if own is None or isinstance(config, own):
        return config
    return own(**{k: v for k, v in config.to_dict().items() if k != "model_type"})


def build_model(spec: ModelSpec, dtype: str = "fp32", p: Profile | str = "tiny", seed: int = 0) -> tuple[Any, Any]:
    """(model in eval mode with random weights, its config)."""
    import torch
    import transformers

    config = build_config(spec, p)
    fam = family(spec.model_type)
    if fam.subconfig:
        config = getattr(config, fam.subconfig)
    cls = getattr(transformers, spec.model_class or model_class_name(spec.model_type))
    config = as_config_class(fam.config_class, config)
    torch.manual_seed(seed)
    if hasattr(config, "_attn_implementation_internal"):
        model = cls._from_config(config, **fam.model_kwargs).eval()
    else:  # a deprecated model's config that skips PretrainedConfig.__init__
        model = cls(config, **fam.model_kwargs).eval()
    return model.to(torch_dtype(dtype)), config
