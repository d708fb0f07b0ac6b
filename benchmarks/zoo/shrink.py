"""The generic config shrinker: a transformers config dict in, the same config at a size profile out.

It works on ``config.to_dict()`` (plain Python, no transformers or torch import), so it is cheap and
testable on its own; :func:`benchmarks.zoo.build.build_config` turns the result back into a config object.

What it changes, by attribute name (one table, :data:`RULES`), in the config and in every nested
sub-config (the ``text_config``/``vision_config``/``audio_config``/``encoder``/``decoder``/``backbone_config``
dicts of multimodal and encoder-decoder models):

* scalars are capped at the profile's value (never grown): hidden sizes, layers, heads, key/value heads,
  head dims, feed-forward sizes, vocabularies, experts, position tables, image and patch sizes;
* per-stage lists of hierarchical models keep their length and widths: depths become 1, heads at most 2;
* lists with one entry per layer (``layer_types``, a per-layer ``attention_window``) are cut to the new
  number of layers (keeping every layer kind), and layer indices (``out_indices``, ``global_attn_indexes``)
  are clamped into it;
* special token ids at or above the new vocabulary are remapped below it, consistently over the whole
  tree (an ``image_token_index`` of the top config and the text config's ids stay distinct);
* divisibility is restored: heads divide the hidden size, key/value heads divide the heads;
* options that need a package or a download the zoo does without are switched off (:data:`SWITCHES`), and
  timm backbone sub-configs become transformers backbones (:data:`TIMM_BACKBONES`).
"""

from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from benchmarks.zoo.profiles import Profile

_PREFIX = r"^((encoder|decoder|vision|text|audio|speech|t2u|qformer|cross|fusion|prompt|mask|unit|adapter)_)?"

# (pattern over the attribute name, profile field): scalars are capped at the profile's value; first match wins
RULES: list[tuple[str, str]] = [
    (_PREFIX + r"(num_key_value_heads|num_kv_heads|n_kv_heads|multi_query_group_num|num_key_value_groups)$",
     "kv_heads"),
    (_PREFIX + r"(num_attention_heads|num_heads|n_heads?|attention_heads|num_attn_heads)$", "heads"),
    (_PREFIX + r"(num_(encoder|decoder)_attention_heads|(encoder|decoder)_num_attention_heads)$", "heads"),
    (_PREFIX + r"(head_dim|d_kv|d_head|attention_head_dim|dim_head|kv_channels|v_head_dim|qk_nope_head_dim|"
     r"qk_rope_head_dim|attention_head_size|rotary_dim)$", "head_dim"),
    (_PREFIX + r"(intermediate_size|ffn_dim|d_ff|d_inner|n_inner|dff|mlp_dim|ffn_hidden_size|feedforward_dim|"
     r"moe_intermediate_size|shared_expert_intermediate_size|ffn_embedding_dim|feed_forward_size)$", "intermediate"),
    (_PREFIX + r"(num_hidden_layers|num_layers|n_layers?|layers|depth|num_(encoder|decoder)_layers|"
     r"(encoder|decoder)_num_hidden_layers)$", "layers"),
    (_PREFIX + r"(hidden_size|d_model|n_embd|n_embed|emb_dim|embed_dim|embedding_size|embedding_dim|hidden_dim|"
     r"dim|projection_dim|word_embed_proj_dim|d_embed|model_dim|output_hidden_size|pooler_output_size|"
     r"pooler_hidden_size|mm_hidden_size|attention_hidden_size|image_text_hidden_size|projection_hidden_size|"
     r"encoder_hidden_size|decoder_hidden_size|projection_size|codebook_dim|upsample_groups|mit_hidden_size|"
     r"out_hidden_size|reassemble_hidden_size|d_latents|base_channels)$",
     "hidden"),
    (r"^(.*_)?vocab_size$|^codebook_size$|^num_embeddings$", "vocab"),
    (r"^(num_local_experts|num_experts|moe_num_experts|n_routed_experts)$", "experts"),
    (r"^(num_experts_per_tok|moe_topk|num_selected_experts|moe_k)$", "experts_per_token"),
    (r"^(max_position_embeddings|n_positions|max_target_positions|n_ctx)$", "positions"),
    (r"^max_source_positions$", "audio_positions"),
    (r"^(.*_)?(image_size|img_size)$", "image"),
    (r"^(.*_)?patch_size$", "patch"),
    (r"^attention_window$", "window"),
    (r"^num_queries$", "queries"),
]
_COMPILED = [(re.compile(p), f) for p, f in RULES]

# settings that need a package or a download the zoo does without (timm backbones, CUDA-only Mamba kernels)
# (a set option -> what replaces it: a timm backbone becomes the config's default transformers backbone)
SWITCHES: dict[str, dict[str, Any]] = {
    # a model builds in float32 and is cast to the zoo's dtype (the key is ``dtype`` from transformers 5 on)
    "torch_dtype": {"torch_dtype": "float32"},
    "dtype": {"dtype": "float32"},
    "use_timm_backbone": {"use_timm_backbone": False, "backbone": None, "backbone_kwargs": None},
    "use_pretrained_backbone": {"use_pretrained_backbone": False},
    "use_mamba_kernels": {"use_mamba_kernels": False},
}

# a timm backbone that a config writes as a sub-config (transformers 5: DETR's ``resnet50``) -> the transformers
# backbone the config builds where timm is switched off (transformers 4 builds it itself)
TIMM_BACKBONES: dict[str, dict[str, Any]] = {
    "resnet50": {"model_type": "resnet", "out_features": ["stage4"]},
    "swin_tiny_patch4_window7_224": {"model_type": "swin", "out_indices": [2, 3, 4]},
}

# per-stage lists of hierarchical models (their length is the number of stages and stays); their widths stay
# too: channel counts are tied together across stages, stems, necks and heads in ways no name tells
STAGE_DEPTHS = re.compile(r"^(depths|depth|num_layers|stage_num_blocks|num_block_repeats|num_blocks|blocks)$")
STAGE_HEADS = re.compile(_PREFIX + r"(num_attention_heads|num_heads|heads)$")
LAYER_INDICES = re.compile(r"^(out_indices|.*_indexes|.*_indices)$")
TOKEN_ID = re.compile(r"^(.*_)?token_(id|index|ids)$")


def _field(key: str) -> str | None:
    for pattern, name in _COMPILED:
        if pattern.match(key):
            return name
    return None


def _target(p: Profile, name: str) -> int:
    if name == "audio_positions":
        return max(1, p.audio_frames // 2)
    return int(getattr(p, name))


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def is_subconfig(v: Any) -> bool:
    """A nested config dict (it names its model type)."""
    return isinstance(v, dict) and isinstance(v.get("model_type"), str)


def token_ids(d: dict[str, Any]) -> set[int]:
    """Every special token id in a config dict and its sub-configs."""
    out: set[int] = set()
    for k, v in d.items():
        if is_subconfig(v):
            out |= token_ids(v)
        elif TOKEN_ID.match(k):
            out |= {x for x in (v if isinstance(v, list) else [v]) if _is_int(x) and x >= 0}
    return out


def _remap_ids(d: dict[str, Any], remap: dict[int, int]) -> None:
    for k, v in d.items():
        if is_subconfig(v):
            _remap_ids(v, remap)
        elif TOKEN_ID.match(k):
            if _is_int(v):
                d[k] = remap.get(v, v)
            elif isinstance(v, list):
                d[k] = [remap.get(x, x) if _is_int(x) else x for x in v]


def token_remap(d: dict[str, Any], vocab: int) -> dict[int, int]:
    """Ids at or above ``vocab`` -> distinct ids just below it (largest first), keeping equal ids equal."""
    high = sorted((i for i in token_ids(d) if i >= vocab), reverse=True)
    return {old: vocab - 1 - n for n, old in enumerate(high)}


def _largest_divisor(n: int, at_most: int) -> int:
    return max(k for k in range(1, max(1, min(n, at_most)) + 1) if n % k == 0)


def _shrink_list(key: str, v: list[Any], p: Profile) -> list[Any]:
    if not v or not all(_is_int(x) for x in v):
        return v
    if STAGE_DEPTHS.match(key):
        return [min(x, 1) for x in v]
    if STAGE_HEADS.match(key):
        return [min(x, 2) for x in v]
    name = _field(key)
    if name in ("image", "patch", "window"):
        return [min(x, _target(p, name)) for x in v]
    return v


def _layer_count(d: dict[str, Any], p: Profile) -> int:
    """Layers of this level after shrinking: the profile's, or as many as a backbone's ``out_indices`` need."""
    out = d.get("out_indices")
    return max(p.layers, len(out)) if isinstance(out, list) else p.layers


def _shrink_one(d: dict[str, Any], p: Profile) -> None:
    """Shrink one config level in place (sub-configs are handled by the caller)."""
    old_layers: set[int] = set()
    widths: dict[int, int] = {}  # a hidden size before -> after (lists of it follow)
    new_layers = _layer_count(d, p)
    before = dict(d)
    # a hierarchical model counts its layers in a per-stage depth list (its ``num_layers`` is the stage count)
    staged = any(STAGE_DEPTHS.match(k) and isinstance(v, list) for k, v in d.items())
    for k, v in list(d.items()):
        if is_subconfig(v) or TOKEN_ID.match(k):
            continue
        if k in SWITCHES:
            if v:
                d.update(SWITCHES[k])
            continue
        if isinstance(v, list):
            d[k] = _shrink_list(k, v, p)
            continue
        name = _field(k)
        if name is None or not _is_int(v) or v <= 0 or (staged and name == "layers"):
            continue
        target = new_layers if name == "layers" else _target(p, name)
        if name == "layers" and v > target:
            old_layers.add(v)
        if name == "hidden" and v > target:
            widths[v] = target
        d[k] = min(v, target)
    _keep_attention_kind(d, before)
    _follow_layers(d, old_layers, new_layers)
    for k, v in list(d.items()):  # channel lists that repeat a shrunk hidden size ([256, 256, 256]) follow it
        if isinstance(v, list) and len(v) > 1 and all(_is_int(x) and x in widths for x in v) and len(set(v)) == 1:
            d[k] = [widths[x] for x in v]
    _restore_divisibility(d)


def _keep_attention_kind(d: dict[str, Any], before: dict[str, Any]) -> None:
    """Multi-head attention stays multi-head: key/value heads that equalled the heads still do (some models,
    e.g. multi-head latent attention, have no grouped-query form)."""
    for k in [k for k in d if _field(k) == "kv_heads"]:
        heads = k.replace("key_value", "attention").replace("kv_heads", "heads")
        heads = heads if heads in d else "num_attention_heads"
        if _is_int(before.get(heads)) and before.get(k) == before[heads]:
            d[k] = d[heads]


def _follow_layers(d: dict[str, Any], old_layers: set[int], new_layers: int) -> None:
    """Per-layer lists are cut to the new layer count; layer indices are moved inside it."""
    if not old_layers:
        return
    for k, v in list(d.items()):
        if not isinstance(v, list):
            continue
        if k == "out_indices" and all(_is_int(x) for x in v):  # the last stages, as many as before
            d[k] = list(range(new_layers - len(v) + 1, new_layers + 1))
        elif LAYER_INDICES.match(k) and all(_is_int(x) for x in v):
            d[k] = sorted({min(x, new_layers - 1) if x >= 0 else x for x in v})
        elif len(v) in old_layers and not STAGE_DEPTHS.match(k):
            d[k] = _cut_layers(v, new_layers)
    if "out_indices" in d:  # backbones recompute their stage names from the layers
        d.pop("stage_names", None)
        d["out_features"] = None


def _cut_layers(v: list[Any], n: int) -> list[Any]:
    """The first ``n`` entries of a per-layer list; a list of layer kinds keeps every kind it had (a hybrid whose
    first layers are all linear attention keeps an attention layer): the first layer of each lost kind replaces
    the last entries."""
    cut = v[:n]
    if all(isinstance(x, str) for x in v):
        lost = list(dict.fromkeys(x for x in v if x not in cut))
        if lost and len(lost) < n:
            cut = cut[:n - len(lost)] + lost
    return cut


def _restore_divisibility(d: dict[str, Any]) -> None:
    hidden = next((d[k] for k in ("hidden_size", "d_model", "n_embd", "embed_dim", "dim") if _is_int(d.get(k))), None)
    head_dim = d.get("head_dim")
    for hk in [k for k in d if _field(k) == "heads" and _is_int(d[k]) and d[k] > 0]:
        if hidden and not _is_int(head_dim) and hidden % d[hk]:
            d[hk] = _largest_divisor(hidden, d[hk])
    heads = d.get("num_attention_heads")
    for kk in [k for k in d if _field(k) == "kv_heads" and _is_int(d[k]) and d[k] > 0]:
        if _is_int(heads) and heads > 0 and heads % d[kk]:
            d[kk] = math.gcd(heads, d[kk])


def _without_timm(d: dict[str, Any]) -> None:
    """Timm backbone sub-configs become their transformers backbone (:data:`TIMM_BACKBONES`)."""
    for k, v in d.items():
        if is_subconfig(v) and v["model_type"] == "timm_backbone" and v.get("backbone") in TIMM_BACKBONES:
            d[k] = dict(TIMM_BACKBONES[v["backbone"]])


def _walk(d: dict[str, Any], fn: Callable[[dict[str, Any]], None]) -> None:
    fn(d)
    for v in d.values():
        if is_subconfig(v):
            _walk(v, fn)


def shrink(config: dict[str, Any], p: Profile) -> dict[str, Any]:
    """A shrunk copy of a config dict (``PretrainedConfig.to_dict()``); the input is not changed."""
    d = copy.deepcopy(config)
    remap = token_remap(d, p.vocab)
    _remap_ids(d, remap)
    _walk(d, _without_timm)
    _walk(d, lambda level: _shrink_one(level, p))
    return d


@dataclass(frozen=True)
class IfPresent:
    """An override set only where the config dict has its leaf: a field of one transformers version that
    another computes in ``__init__`` (and so drops from the dict)."""

    value: Any


def set_path(d: dict[str, Any], path: str, value: Any) -> None:
    """Set ``"vision_config.image_size"``-style dotted paths in a config dict (creating nothing but the leaf;
    a path through a sub-config that is still None is skipped, and an :class:`IfPresent` leaf that is absent)."""
    *parents, leaf = path.split(".")
    for part in parents:
        if d[part] is None:  # a sub-config the config creates only in __init__ (set on the second pass)
            return
        d = d[part]
    if isinstance(value, IfPresent):
        if leaf not in d:
            return
        value = value.value
    d[leaf] = value(d) if callable(value) else value


def apply_overrides(d: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Apply per-family or per-variant overrides (dotted paths; a callable value gets the dict it lands in)."""
    for path, value in overrides.items():
        set_path(d, path, value)
    return d
