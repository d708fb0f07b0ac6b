"""Per-family knowledge: only what the generic shrinker and input generator get wrong, each with its reason.

A :class:`Family` can carry config overrides (dotted paths, applied after shrinking), a ``base_config`` for
composite types whose config has no defaults, a model class (or a sub-model built from a sub-config), input
sizes, input hooks that edit the generated inputs, and a count of image tokens where ``get_image_features``
does not give it. :data:`FAMILIES` is grouped by what the entry fixes: the config, the inputs, a composite
config, the model class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from benchmarks.zoo.shrink import IfPresent


@dataclass(frozen=True)
class Family:
    why: str
    config: Mapping[str, Any] = field(default_factory=dict)  # dotted path -> value, after shrinking
    base_config: Callable[[], dict[str, Any]] | None = None  # kwargs of a composite config without defaults
    model_class: str | None = None
    config_class: str | None = None  # the config class the model class takes, where the type's own is another
    subconfig: str | None = None  # build the model from this sub-config (a sub-model of a composite type)
    model_kwargs: Mapping[str, Any] = field(default_factory=dict)  # extra arguments of the model class
    sizes: Mapping[str, int] = field(default_factory=dict)  # input sizes other than the profile's: batch, seq...
    # input hooks, each ``hook(out, model=, config=, profile=, gen=, sizes=) -> out``: ``pre_inputs`` runs before
    # image tokens are counted and placed (reshapes pixel values), ``inputs`` at the end
    pre_inputs: Callable[..., dict[str, Any]] | None = None
    inputs: Callable[..., dict[str, Any]] | None = None
    # tokens per image where get_image_features does not tell: ``image_tokens(model, config, inputs) -> [n, ...]``
    image_tokens: Callable[..., list[int]] | None = None


# ---- input hooks (imports inside: benchmarks.zoo.inputs imports this module)


def _ids(config: Any, shape: tuple[int, ...], gen: Any) -> Any:
    from benchmarks.zoo.inputs import token_ids

    return token_ids(config, shape, gen)


def _randn(*shape: int, gen: Any) -> Any:
    import torch

    return torch.randn(*shape, generator=gen)


def _randint(high: int, *shape: int, gen: Any) -> Any:
    import torch

    return torch.randint(0, high, shape, generator=gen)


def _ones(*shape: int) -> Any:
    import torch

    return torch.ones(*shape, dtype=torch.long)


def _retribert(out, *, config, gen, sizes, **_):
    b, s = sizes["batch"], sizes["seq"]
    return {"input_ids_query": _ids(config, (b, s), gen), "attention_mask_query": _ones(b, s),
            "input_ids_doc": _ids(config, (b, s), gen), "attention_mask_doc": _ones(b, s)}


def _image_pair(out, **_):
    import torch

    pv = out["pixel_values"]
    return {**out, "pixel_values": torch.stack([pv, pv.flip(-1)], dim=1)}


def _one_image_per_row(out, **_):
    """(batch, images, channels, height, width) with one image per row."""
    return {**out, "pixel_values": out["pixel_values"].unsqueeze(1)}


def _tvp(out, *, config, gen, sizes, **_):
    size = config.max_img_size
    return {**out, "pixel_values": _randn(sizes["batch"], config.num_frames, 3, size, size, gen=gen)}


def _video(frames: int) -> Callable[..., dict[str, Any]]:
    def hook(out, **_):
        pv = out["pixel_values"]
        return {**out, "pixel_values": pv.unsqueeze(1).expand(-1, frames, *pv.shape[1:]).contiguous()}
    return hook


def _decision_transformer(out, *, config, gen, sizes, **_):
    b, t = sizes["batch"], 8
    return {"states": _randn(b, t, config.state_dim, gen=gen), "actions": _randn(b, t, config.act_dim, gen=gen),
            "rewards": _randn(b, t, 1, gen=gen), "returns_to_go": _randn(b, t, 1, gen=gen),
            "timesteps": _randint(config.max_ep_len, b, t, gen=gen), "attention_mask": _ones(b, t)}


def _trajectory_transformer(out, *, config, gen, sizes, **_):
    t = config.transition_dim * 2
    return {"trajectories": _randint(config.vocab_size, sizes["batch"], t, gen=gen)}


def _pop2piano(out, *, config, gen, sizes, **_):
    b, s = sizes["batch"], sizes["seq"]
    out = {k: v for k, v in out.items() if k != "input_ids"}
    return {**out, "input_features": _randn(b, s, config.d_model, gen=gen), "attention_mask": _ones(b, s)}


def _lxmert(out, *, config, gen, sizes, **_):
    import torch

    b, n = sizes["batch"], 4
    return {**out, "visual_feats": _randn(b, n, config.visual_feat_dim, gen=gen),
            "visual_pos": torch.rand(b, n, config.visual_pos_dim, generator=gen)}


def _graphormer(out, *, config, gen, sizes, **_):
    b, n = sizes["batch"], 6
    return {"input_nodes": _randint(config.num_atoms, b, n, 1, gen=gen),
            "input_edges": _randint(config.num_edges, b, n, n, config.multi_hop_max_dist, 1, gen=gen),
            "attn_bias": _randn(b, n + 1, n + 1, gen=gen),
            "in_degree": _randint(config.num_in_degree, b, n, gen=gen),
            "out_degree": _randint(config.num_in_degree, b, n, gen=gen),
            "spatial_pos": _randint(config.num_spatial, b, n, n, gen=gen),
            "attn_edge_type": _randint(config.num_edges, b, n, n, 1, gen=gen)}


def _time_series(out, *, config, gen, sizes, **_):
    b = sizes["batch"]
    past = config.context_length + max(config.lags_sequence)
    feats = config.num_time_features
    return {"past_values": _randn(b, past, gen=gen), "past_time_features": _randn(b, past, feats, gen=gen),
            "past_observed_mask": _ones(b, past).float(), "future_values": _randn(b, config.prediction_length, gen=gen),
            "future_time_features": _randn(b, config.prediction_length, feats, gen=gen)}


def _patch_time_series(out, *, config, gen, sizes, **_):
    return {"past_values": _randn(sizes["batch"], config.context_length, config.num_input_channels, gen=gen)}


def _timesfm(out, *, config, gen, sizes, **_):
    import torch

    b, t = sizes["batch"], 2 * config.patch_length
    return {"past_values": _randn(b, t, gen=gen), "past_values_padding": torch.zeros(b, t, dtype=torch.long),
            "freq": torch.zeros(b, 1, dtype=torch.long)}


def _task_inputs(out, *, config, gen, sizes, **_):
    return {**out, "task_inputs": _ids(config, (sizes["batch"], config.task_seq_len), gen)}


def _seggpt(out, *, gen, **_):
    b, c, h, w = out["pixel_values"].shape
    half = (b, c, h // 2, w)
    return {"pixel_values": _randn(*half, gen=gen), "prompt_pixel_values": _randn(*half, gen=gen),
            "prompt_masks": _randn(*half, gen=gen)}


def _qformer_inputs(frames: int, token: str) -> Callable[..., dict[str, Any]]:
    """The Q-Former's own text ids, and one image token per query token (per frame) in the text."""
    def hook(out, *, config, gen, sizes, **_):
        import torch

        from benchmarks.zoo.inputs import with_image_tokens

        b, s = sizes["batch"], sizes["seq"]
        ids = with_image_tokens(out["input_ids"], getattr(config, token), [config.num_query_tokens * frames] * b)
        return {**out, "input_ids": ids, "attention_mask": torch.ones_like(ids),
                "qformer_input_ids": _randint(config.qformer_config.vocab_size - 1, b, s, gen=gen) + 1,
                "qformer_attention_mask": _ones(b, s)}
    return hook


def _last_text_id(d: dict[str, Any]) -> int:
    return int(d["text_config"]["vocab_size"]) - 1


def _placed_image_token(model_class: str) -> Callable[[dict[str, Any]], int | None]:
    """The image token id (the last text id) where ``model_class`` puts image features at image tokens in the
    text (it has ``get_placeholder_mask``: transformers 5's BLIP-2); None (the default) where it puts them
    before the text."""
    def value(d: dict[str, Any]) -> int | None:
        import transformers

        return _last_text_id(d) if hasattr(getattr(transformers, model_class), "get_placeholder_mask") else None
    return value


def _query_tokens(model, config, inputs):
    """One image token per Q-Former query token."""
    return [config.num_query_tokens] * len(inputs["input_ids"])


def _blip2_qformer(out, *, config, gen, sizes, **_):
    b = sizes["batch"]
    return {"query_embeds": _randn(b, 8, config.hidden_size, gen=gen),
            "encoder_hidden_states": _randn(b, 16, config.encoder_hidden_size, gen=gen)}


def _tvlt(out, *, config, gen, sizes, **_):
    return {**out, "audio_values": _randn(sizes["batch"], config.num_audio_channels, 64, config.frequency_length,
                                          gen=gen)}


def _time_frequency(out, *, config, gen, sizes, **_):
    """Spectrogram patches: (batch, frames, mel bins)."""
    return {"input_values": _randn(sizes["batch"], config.max_length, config.num_mel_bins, gen=gen)}


def _waveform_only(out, **_):
    return {k: v for k, v in out.items() if k != "input_features"}


def _mono(out, **_):
    return {**out, "input_values": out["input_values"].unsqueeze(1)}


def _clap_audio(out, *, config, gen, sizes, **_):
    a = config.audio_config
    return {**out, "input_features": _randn(sizes["batch"], 1, a.spec_size, a.num_mel_bins, gen=gen)}


def _transpose_features(out, **_):
    return {**out, "input_features": out["input_features"].transpose(1, 2).contiguous()}


def _pix2struct(out, *, config, gen, sizes, **_):
    import torch

    b, n = sizes["batch"], 16
    rows = torch.arange(n).div(4, rounding_mode="floor").float() + 1
    cols = torch.arange(n).remainder(4).float() + 1
    patches = _randn(b, n, config.vision_config.patch_embed_hidden_size, gen=gen)
    flat = torch.cat([rows.expand(b, n)[..., None], cols.expand(b, n)[..., None], patches], dim=-1)
    return {**{k: v for k, v in out.items() if k != "input_ids"}, "flattened_patches": flat,
            "attention_mask": _ones(b, n)}


def _idefics(out, *, sizes, **_):
    ids = out["input_ids"]
    return {**out, "pixel_values": out["pixel_values"].unsqueeze(1),
            "image_attention_mask": _ones(ids.shape[0], ids.shape[1], 1)}


def _xmod(out, *, model, **_):
    model.set_default_language("en_XX")
    return out


def _anyres(out, **_):
    """LLaVA-NeXT's any-resolution input with one grid cell: the base image and one tile of the same size."""
    import torch

    pv = out["pixel_values"]
    return {**out, "pixel_values": torch.stack([pv, pv.flip(-1)], dim=1),
            "image_sizes": torch.tensor([list(pv.shape[-2:])] * pv.shape[0])}


def _packed_image_tokens(model, config, inputs):
    """LLaVA-NeXT: features per image after packing (tiles unpadded, newline tokens added); transformers 5's
    ``get_image_features`` packs them itself (its ``pooler_output``)."""
    import inspect

    import torch

    from benchmarks.zoo.inputs import config_attr, feature_counts

    inner = getattr(model, "model", model)
    strategy = config_attr(config, "vision_feature_select_strategy")
    with torch.no_grad():
        feats = inner.get_image_features(inputs["pixel_values"], inputs["image_sizes"],
                                         vision_feature_layer=config_attr(config, "vision_feature_layer"),
                                         vision_feature_select_strategy=strategy)
        if getattr(feats, "pooler_output", None) is not None:
            return feature_counts(feats.pooler_output, len(inputs["pixel_values"]))
        known = {"vision_feature_select_strategy": strategy, "image_newline": inner.image_newline,
                 "vision_aspect_ratio": getattr(config, "vision_aspect_ratio", None)}
        names = inspect.signature(inner.pack_image_features).parameters
        _, lengths = inner.pack_image_features(feats, inputs["image_sizes"],
                                               **{k: v for k, v in known.items() if k in names and v is not None})
    return [int(n) for n in lengths]


def _placed(model, config, inputs):
    """No image tokens to add: the input hook placed them."""
    return [0] * len(inputs["input_ids"])


def _qwen_vl(out, *, config, gen, sizes, **_):
    """Qwen2-VL's flattened patches and the grid (t, h, w) of each image; h * w / merge**2 tokens per image."""
    import torch

    from benchmarks.zoo.inputs import with_image_tokens

    v = config.vision_config
    b, grid = sizes["batch"], 8
    patch_dim = v.in_channels * v.temporal_patch_size * v.patch_size ** 2
    out["pixel_values"] = _randn(b * grid * grid, patch_dim, gen=gen)
    out["image_grid_thw"] = torch.tensor([[1, grid, grid]] * b)
    tokens = grid * grid // v.spatial_merge_size ** 2
    ids = with_image_tokens(out["input_ids"], config.image_token_id, [tokens] * b)
    start = getattr(config, "vision_start_token_id", None)  # the rotary index finds images after their start token
    if start is not None:
        ids[:, 0] = start
    out["input_ids"], out["attention_mask"] = ids, torch.ones_like(ids)
    return out


def _audio_tokens(out, *, model, config, gen, sizes, **_):
    """Whisper-style features with their mask, and the audio tokens the encoder's output replaces."""
    import torch

    from benchmarks.zoo.inputs import with_image_tokens

    feats = out["input_features"]
    b, frames = feats.shape[0], feats.shape[-1]
    lengths = torch.full((b,), frames)
    _, n = model.audio_tower._get_feat_extract_output_lengths(lengths)
    out["feature_attention_mask"] = _ones(b, frames)
    out["input_ids"] = with_image_tokens(out["input_ids"], config.audio_token_index, [int(x) for x in n])
    out["attention_mask"] = torch.ones_like(out["input_ids"])
    return out


def _kosmos2(out, *, config, **_):
    import torch

    from benchmarks.zoo.inputs import with_image_tokens

    n = config.latent_query_num
    ids = with_image_tokens(out["input_ids"], 4, [n] * out["input_ids"].shape[0])
    mask = torch.zeros_like(ids, dtype=torch.bool)
    mask[:, 1:1 + n] = True
    return {**out, "input_ids": ids, "attention_mask": torch.ones_like(ids), "image_embeds_position_mask": mask}


def _siglip2(out, *, config, gen, sizes, **_):
    import torch

    v = config.vision_config
    side = int(v.num_patches ** 0.5)
    b, n = sizes["batch"], side * side
    out["pixel_values"] = _randn(b, n, v.num_channels * v.patch_size ** 2, gen=gen)
    out["pixel_attention_mask"] = _ones(b, n)
    out["spatial_shapes"] = torch.tensor([[side, side]] * b)
    return out


def _musicgen(out, *, config, gen, sizes, **_):
    d = config.decoder
    rows = sizes["batch"] * d.num_codebooks
    return {**out, "decoder_input_ids": _randint(d.vocab_size, rows, sizes["decoder_seq"], gen=gen)}


def _rag(out, *, config, gen, sizes, **_):
    b, s, n = sizes["batch"], sizes["seq"], config.n_docs
    g = config.generator
    return {"input_ids": _ids(config.question_encoder, (b, s), gen), "attention_mask": _ones(b, s),
            "context_input_ids": _ids(g, (b * n, s), gen), "context_attention_mask": _ones(b * n, s),
            "doc_scores": _randn(b, n, gen=gen), "decoder_input_ids": _ids(g, (b, sizes["decoder_seq"]), gen)}


def _chroma(out, *, config, gen, sizes, **_):
    return {**out, "input_features": _randn(sizes["batch"], 16, config.num_chroma, gen=gen)}


def _no_cache(out, **_):
    return {**out, "use_cache": False}


def _text_only(out, **_):
    return {k: v for k, v in out.items() if k in ("input_ids", "attention_mask")}


def _text_to_text(out, *, config, gen, sizes, **_):
    return {**_text_only(out), "decoder_input_ids": _ids(config, (sizes["batch"], sizes["decoder_seq"]), gen)}


def _omdet(out, *, config, gen, sizes, **_):
    import torch

    b, s, classes = sizes["batch"], 8, 3
    text = config.text_config
    return {**out, "classes_input_ids": _ids(text, (b * classes, s), gen), "classes_attention_mask": _ones(b * classes, s),
            "tasks_input_ids": _ids(text, (b, s), gen), "tasks_attention_mask": _ones(b, s),
            "classes_structure": torch.full((b,), classes, dtype=torch.long)}


def _mllama(out, *, config, gen, sizes, **_):
    """One image per row with every tile: (batch, images, tiles, channels, height, width), its aspect ratio,
    and the image token the text's cross-attention mask points at."""
    import torch

    v = config.vision_config
    b, tiles = sizes["batch"], v.max_num_tiles
    ids = out["input_ids"].clone()
    ids[:, 1] = config.image_token_index
    s = ids.shape[1]
    return {"input_ids": ids, "attention_mask": torch.ones_like(ids),
            "pixel_values": _randn(b, 1, tiles, v.num_channels, v.image_size, v.image_size, gen=gen),
            "aspect_ratio_ids": torch.ones(b, 1, dtype=torch.long), "aspect_ratio_mask": _ones(b, 1, tiles),
            "cross_attention_mask": _ones(b, s, 1, tiles)}


def _jukebox(out, *, gen, sizes, **_):
    return {"raw_audio": _randn(sizes["batch"], 2048, 1, gen=gen)}


def _class_defaults(name: str) -> dict[str, Any]:
    import transformers

    return getattr(transformers, name)().to_dict()


# composite configs without defaults: their parts, from the parts' own defaults (then shrunk like any config)
def _defaults(model_type: str, **extra: Any) -> dict[str, Any]:
    from transformers import CONFIG_MAPPING

    return {**CONFIG_MAPPING[model_type]().to_dict(), **extra}


def _decoder(model_type: str) -> dict[str, Any]:
    return _defaults(model_type, is_decoder=True, add_cross_attention=True)


GENERIC = Family("no entry: the generic shrinker and input generator do")

STATIC_CACHE = ("no cache: the default cache is made inside forward and calls torch._dynamo.mark_static_address, "
                "which Dynamo refuses to trace (torch.compile raises)")

UNSET = "the default config leaves a size unset (None) that the model reads"

SWIN_WINDOW = "at 64 pixels the last stage is 2x2: a larger window than that breaks the relative position bias"

FAMILIES: dict[str, Family] = {
    # ---- config: what the generic shrinker gets wrong
    "swin": Family(SWIN_WINDOW, {"window_size": 2}),
    "swinv2": Family(SWIN_WINDOW, {"window_size": 2}),
    "donut-swin": Family(SWIN_WINDOW, {"window_size": 2}),
    "maskformer-swin": Family(SWIN_WINDOW, {"window_size": 2}),
    "gpt_neo": Family("the per-layer attention types come from a (pattern, repeat) list", 
                      {"attention_types": [[["global", "local"], 1]]}),
    "nemotron": Family("the default config leaves num_key_value_heads None, which the model divides by",
                       {"num_key_value_heads": 2}),
    "esm": Family("the default config has no vocabulary and no padding id",
                  {"vocab_size": 33, "pad_token_id": 1, "mask_token_id": 2}),
    "mamba2": Family("heads x head_dim must equal hidden x expand", {"num_heads": 8, "n_groups": 1}),
    "bamba": Family("Mamba heads x head dim must equal hidden x expand", {"mamba_n_heads": 8, "mamba_d_head": 16}),
    "reformer": Family("axial position embeddings: dims sum to hidden, shape multiplies to the sequence",
                       {"axial_pos_embds_dim": [32, 32], "axial_pos_shape": [4, 4], "max_position_embeddings": 16}),
    "transfo-xl": Family("adaptive embedding cutoffs must lie inside the shrunk vocabulary",
                         {"cutoffs": [64, 128], "tie_projs": [False, True, True], "div_val": 1}),
    "cvt": Family("each stage indexes its drop-path rates by the stage number: stage i needs depth > i",
                  {"depth": [1, 2, 3]}),
    "efficientformer": Family("dim is the last stage's width; attention biases are sized for the resolution",
                              {"dim": 448, "image_size": 224, "patch_size": 16}),
    "efficientnet": Family("hidden_dim is the width of the last convolution, not a free size", {"hidden_dim": 2560}),
    "levit": Family("attention biases are sized for the configured resolution", {"image_size": 224, "patch_size": 16}),
    "upernet": Family("the auxiliary head reads the backbone's third stage (1024 channels)",
                      {"auxiliary_in_channels": 1024}),
    "sam": Family("the vision encoder's output channels feed the prompt encoder and mask decoder",
                  {"vision_config.output_channels": 64, "vision_config.num_pos_feats": 32}),
    "sam_hq": Family("the vision encoder's output channels feed the prompt encoder and mask decoder",
                     {"vision_config.output_channels": 64, "vision_config.num_pos_feats": 32,
                      "mask_decoder_config.vit_dim": 64}),
    "deepseek_v3": Family("expert groups must divide the shrunk experts", {"n_group": 1, "topk_group": 1}),
    "realm": Family("no base model: the embedder", model_class="RealmEmbedder"),
    "vitpose": Family("no base model: pose estimation on the ViTPose backbone", model_class="VitPoseForPoseEstimation"),
    "vitmatte": Family("no base model: image matting (RGB + trimap channels); the fusion stages expect the "
                       "backbone's stride 16", {"backbone_config.patch_size": 16}, model_class="VitMatteForImageMatting"),
    "qwen2_5_omni": Family("the top model only generates; its thinker is the multimodal LM",
                           {"thinker_config.text_config.rope_scaling": {
                               "type": "default", "rope_type": "default", "mrope_section": [2, 3, 3]},
                            "thinker_config.vision_start_token_id": 3},
                           model_class="Qwen2_5OmniThinkerForConditionalGeneration", subconfig="thinker_config",
                           pre_inputs=_text_only),
    "jukebox": Family("the top model only samples; its VQ-VAE encodes and decodes raw audio",
                      model_class="JukeboxVQVAE", subconfig="vqvae_config", inputs=_jukebox),
    "vit_hybrid": Family("the position embeddings are sized from the backbone's feature map (stride 16)",
                         {"backbone_featmap_shape": [1, 1024, 4, 4]}, model_kwargs={"use_mask_token": True}),
    "vipllava": Family("the projector reads hidden states of these layers", {"vision_feature_layers": [-2, -1]}),
    "aria": Family("the projector maps a known patch count to queries", {"projector_patch_to_query_dict": {64: 4}}),
    "gemma3": Family("image tokens are pooled from the patches (8 x 8 at 64 pixels); " + STATIC_CACHE,
                     {"mm_tokens_per_image": 4}, inputs=_no_cache),
    "shieldgemma2": Family("image tokens are pooled from the patches (8 x 8 at 64 pixels); " + STATIC_CACHE,
                           {"mm_tokens_per_image": 4}, inputs=_no_cache),
    "aya_vision": Family(STATIC_CACHE, inputs=_no_cache),
    "cohere2": Family(STATIC_CACHE, inputs=_no_cache),
    "gemma2": Family(STATIC_CACHE, inputs=_no_cache),
    "gemma3_text": Family(STATIC_CACHE, inputs=_no_cache),
    "mamba": Family(STATIC_CACHE, inputs=_no_cache),
    "falcon_mamba": Family(STATIC_CACHE, inputs=_no_cache),
    "zamba": Family("the layer pattern starts with two Mamba layers and a hybrid one; transformers 5 keeps the "
                    "pattern in a field (else cut to the shrunk layers) and ties the hybrid layers' shared attention "
                    "to a second hybrid layer, which it needs; attention runs on the hidden state concatenated with "
                    "the embeddings", {"num_hidden_layers": 3, "attention_hidden_size": 128,
                                       "layers_block_type": IfPresent(["linear_attention", "hybrid", "hybrid"])}),
    "align": Family("image embeddings are the vision tower's pooled output: the projection must match its width",
                    {"projection_dim": 640}),
    "csm": Family("text only: audio needs its per-row cut-offs", inputs=lambda out, **_: {
        k: v for k, v in out.items() if k != "input_values"}),
    "llama4": Family("the vision adapter's sizes are tied (pixel shuffle x4 channels -> projector -> text); "
                     "no cache: its default cache is bfloat16 whatever the model's dtype",
                     {"vision_config.intermediate_size": 256, "vision_config.projector_input_dim": 64,
                      "vision_config.projector_output_dim": 64, "vision_config.vision_output_dim": 64},
                     inputs=_no_cache),
    "llama4_text": Family("no cache: its default cache is bfloat16 whatever the model's dtype",
                          inputs=_no_cache),
    "layoutlmv3": Family("the 2-D position embedding is 4 coordinates and 2 shapes wide: it must sum to hidden",
                         {"coordinate_size": 12, "shape_size": 8}),
    "lilt": Family("the layout embedding is 6 tables of hidden // 6: hidden must divide by 6", {"hidden_size": 96}),
    "depth_pro": Family("the fusion stage reads these hidden states of the patch encoder",
                        {"intermediate_hook_ids": [1, 0]}),
    "granitemoehybrid": Family("the layer kinds are a list: one Mamba layer, one attention layer",
                               {"mamba_n_heads": 8, "mamba_d_head": 16, "layer_types": ["mamba", "attention"]}),
    "zamba2": Family("the layer kinds are a list: one Mamba layer, one hybrid (shared attention) layer",
                     {"layers_block_type": ["mamba", "hybrid"]}),
    "zoedepth": Family("the bottleneck is as wide as the (shrunk) fusion stages", {"bottleneck_features": 64}),
    "chameleon": Family("the model maps its image vocabulary at construction; text only (transformers 5's config "
                        "names an image token)", {"vocabulary_map": {"<image>": 3}}, pre_inputs=_text_only),
    "emu3": Family("the model maps its image vocabulary at construction; text only", {
        "vocabulary_map": {"<image>": 3, "<|extra_200|>": 4}}, pre_inputs=_text_only),
    "seamless_m4t": Family("text to text: speech input is the other, exclusive mode", pre_inputs=_text_to_text),
    "seamless_m4t_v2": Family("text to text: speech input is the other, exclusive mode", pre_inputs=_text_to_text),
    "omdet-turbo": Family("class and task prompts per image; the text projection reads the text tower's width",
                          {"text_projection_in_dim": 64, "encoder_in_channels": [128, 256, 512],
                           "backbone_config.window_size": 2}, inputs=_omdet),
    "mllama": Family("the text model reads rope_scaling, which the default config leaves None; tiled images with "
                     "their aspect ratio and cross-attention mask", {
                         "text_config.rope_scaling": {"rope_type": "default"},
                         "vision_config.vision_output_dim": 128}, inputs=_mllama),
    "mimi": Family("the quantizer's width is a free size the shrinker does not know",
                   {"vector_quantization_hidden_dimension": 64}),
    "qwen2_vl": Family("rotary sections split the (shrunk) head dim; the model reads the vision start id from the "
                       "top config, where the default config lacks it", {
                           "text_config.rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
                           "vision_start_token_id": 3}, pre_inputs=_qwen_vl, image_tokens=_placed),
    "qwen2_5_vl": Family("as qwen2_vl; attention windows of the vision tower",
                         {"text_config.rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]},
                          "vision_start_token_id": 3, "vision_config.window_size": 16},
                         pre_inputs=_qwen_vl, image_tokens=_placed),
    "qwen3_vl": Family("flattened patches with their grid, as qwen2_vl", pre_inputs=_qwen_vl, image_tokens=_placed),
    "qwen3_vl_moe": Family("flattened patches with their grid, as qwen2_vl", pre_inputs=_qwen_vl,
                           image_tokens=_placed),
    "glm4v": Family("flattened patches with their grid, as qwen2_vl; rotary sections split the (shrunk) head dim",
                    {"text_config.rope_parameters.mrope_section": [2, 3, 3]}, pre_inputs=_qwen_vl,
                    image_tokens=_placed),
    "qwen2_vl_text": Family("rotary sections split the (shrunk) head dim",
                            {"rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}}),
    "qwen2_5_vl_text": Family("rotary sections split the (shrunk) head dim",
                              {"rope_scaling": {"type": "mrope", "mrope_section": [2, 3, 3]}}),
    "time_series_transformer": Family("a forecast needs its lengths", {
        "prediction_length": 4, "context_length": 8, "lags_sequence": [1, 2, 3], "num_time_features": 1},
        inputs=_time_series),
    "informer": Family("a forecast needs its lengths", {
        "prediction_length": 4, "context_length": 8, "lags_sequence": [1, 2, 3], "num_time_features": 1},
        inputs=_time_series),
    "autoformer": Family("a forecast needs its lengths", {
        "prediction_length": 4, "context_length": 8, "label_length": 4, "lags_sequence": [1, 2, 3],
        "num_time_features": 1},
        inputs=_time_series),
    "patchtst": Family("past values of the context length", inputs=_patch_time_series),
    "patchtsmixer": Family("past values of the context length", inputs=_patch_time_series),
    "timesfm": Family("past values, their padding and a frequency class", inputs=_timesfm),
    "ministral": Family(UNSET, {"head_dim": 16}),
    "hunyuan_v1_dense": Family(UNSET, {"head_dim": 16}),
    "deepseek_v2": Family(UNSET, {"num_experts_per_tok": 2}),
    "dots1": Family(UNSET, {"n_routed_experts": 4, "num_experts_per_tok": 2, "n_shared_experts": 1}),
    # ---- inputs: what the forward signature does not tell
    "retribert": Family("query and document ids, not input_ids; the BERT encoders read position_embedding_type, "
                        "which the config does not declare",
                        {"position_embedding_type": "absolute"}, inputs=_retribert),
    "superglue": Family("image pairs: (batch, 2, channels, height, width); the default config sets its layer lists "
                        "to None", {
        "keypoint_encoder_sizes": [32, 64], "gnn_layers_types": ["self", "cross"],
        "keypoint_detector_config.descriptor_decoder_dim": 64}, pre_inputs=_image_pair),
    "tvp": Family("video frames; the text embeddings read type_vocab_size, which the config does not declare; "
                  "the visual prompt must fit the frame; the 2-D position embeddings hold for batch 1 only",
                  {"type_vocab_size": 2, "visual_prompt_size": 8}, sizes={"batch": 1}, pre_inputs=_tvp),
    "decision_transformer": Family("states, actions, rewards, returns and timesteps", inputs=_decision_transformer),
    "trajectory_transformer": Family("discretised trajectories", inputs=_trajectory_transformer),
    "pop2piano": Family("audio features take the place of input embeddings", inputs=_pop2piano),
    "lxmert": Family("region features and boxes", inputs=_lxmert),
    "graphormer": Family("graphs: nodes, edges, degrees, spatial positions", inputs=_graphormer),
    "oneformer": Family("task tokens; the pixel decoder's width is a free size the shrinker does not know",
                        {"conv_dim": 64}, inputs=_task_inputs),
    "seggpt": Family("a prompt image and its mask, stacked above the input: the model's height is twice the "
                     "image's; prompt and input merge before the first feature layer",
                     {"image_size": [128, 64], "merge_index": 0}, inputs=_seggpt),
    "blip-2": Family("the Q-Former's outputs take the place of image tokens (transformers 5), one per query token; "
                     "the default config has no id for them", {"image_token_index": _placed_image_token("Blip2Model")},
                     image_tokens=_query_tokens),
    "instructblip": Family("the Q-Former's own text ids; image tokens (the default config has no id for them)",
                           {"image_token_index": _last_text_id}, inputs=_qformer_inputs(1, "image_token_index")),
    "instructblipvideo": Family("the Q-Former's own text ids; image tokens (the default config has no id for "
                                "them); video frames", {"video_token_index": _last_text_id}, pre_inputs=_video(2),
                                inputs=_qformer_inputs(2, "video_token_index")),
    "blip_2_qformer": Family("query embeddings and image features to attend to", inputs=_blip2_qformer),
    "tvlt": Family("audio spectrogram patches beside the video frames", inputs=_tvlt),
    "audio-spectrogram-transformer": Family("spectrograms of max_length frames", {"max_length": 64},
                                            inputs=_time_frequency),
    "dac": Family("mono waveforms: (batch, 1, samples)", inputs=_mono),
    "univnet": Family("spectrograms: (batch, frames, mel bins)", inputs=_transpose_features),
    "clvp": Family("spectrograms: (batch, mel bins, frames); rotary embeddings take at least 32 dims of a head",
                   {"text_config.num_attention_heads": 2, "speech_config.num_attention_heads": 2},
                   inputs=_transpose_features),
    "clap": Family("spectrogram images (batch, 1, time, mel bins), 64 x 64: the audio Swin's window must fit; "
                   "its output width is its patch width times 8", {
                       "audio_config.spec_size": 64, "audio_config.window_size": 2, "audio_config.hidden_size": 768},
                   inputs=_clap_audio),
    "pix2struct": Family("flattened patches with their row and column", inputs=_pix2struct),
    "idefics": Family("images per row and their attention mask", inputs=_idefics),
    "idefics2": Family("images per row: (batch, images, channels, height, width)", pre_inputs=_one_image_per_row),
    "idefics3": Family("images per row: (batch, images, channels, height, width)", pre_inputs=_one_image_per_row),
    "smolvlm": Family("images per row: (batch, images, channels, height, width)", pre_inputs=_one_image_per_row),
    "xmod": Family("the language adapter must be chosen", inputs=_xmod),
    "llava_next": Family("any-resolution images with one grid cell", {"image_grid_pinpoints": [[64, 64]]},
                         image_tokens=_packed_image_tokens,
                         pre_inputs=_anyres),
    "llava_next_video": Family("any-resolution images with one grid cell", {"image_grid_pinpoints": [[64, 64]]},
                         image_tokens=_packed_image_tokens,
                               pre_inputs=_anyres),
    "llava_onevision": Family("any-resolution images with one grid cell", {"image_grid_pinpoints": [[64, 64]]},
                         image_tokens=_packed_image_tokens,
                              pre_inputs=_anyres),
    "granitevision": Family("a LLaVA-NeXT configuration; any-resolution images with one grid cell",
                            {"image_grid_pinpoints": [[64, 64]]}, model_class="LlavaNextModel", pre_inputs=_anyres,
                            image_tokens=_packed_image_tokens),
    "qwen2_audio": Family("audio features with their mask and the audio tokens they replace",
                          inputs=_audio_tokens),
    "kosmos-2": Family("the image's latent queries take positions marked in the text",
                       {"latent_query_num": 4}, inputs=_kosmos2),
    "siglip2": Family("images as patch sequences with their mask and shapes", inputs=_siglip2),
    # ---- composite configs without defaults
    "encoder-decoder": Family("no default parts: BERT encoder, BERT decoder",
                              base_config=lambda: {"encoder": _defaults("bert"), "decoder": _decoder("bert")}),
    "vision-encoder-decoder": Family("no default parts: ViT encoder, GPT-2 decoder",
                                     base_config=lambda: {"encoder": _defaults("vit"), "decoder": _decoder("gpt2")}),
    "nougat": Family("no default parts: Donut-Swin encoder, mBART decoder (as the released model); a vision "
                     "encoder-decoder config (transformers 5 has a Nougat config class, which the model refuses)",
                     {"encoder.window_size": 2},
                     base_config=lambda: {"encoder": _defaults("donut-swin"), "decoder": _decoder("mbart")},
                     model_class="VisionEncoderDecoderModel", config_class="VisionEncoderDecoderConfig"),
    "speech-encoder-decoder": Family("no default parts: wav2vec2 encoder, BERT decoder",
                                     base_config=lambda: {"encoder": _defaults("wav2vec2"), "decoder": _decoder("bert")},
                                     inputs=_waveform_only),
    "vision-text-dual-encoder": Family("no default parts: CLIP vision, BERT text",
                                       base_config=lambda: {"vision_config": _defaults("clip_vision_model"),
                                                            "text_config": _defaults("bert")}),
    "musicgen": Family("no default parts: T5 text encoder, EnCodec audio encoder, Musicgen decoder; decoder ids "
                       "per codebook", base_config=lambda: {
                           "text_encoder": _defaults("t5"), "audio_encoder": _defaults("encodec"),
                           "decoder": _class_defaults("MusicgenDecoderConfig")},
                       model_class="MusicgenForConditionalGeneration", inputs=_musicgen),
    "musicgen_melody": Family("no default parts: T5 text encoder, EnCodec audio encoder, Musicgen-melody decoder; "
                              "decoder ids per codebook", base_config=lambda: {
                                  "text_encoder": _defaults("t5"), "audio_encoder": _defaults("encodec"),
                                  "decoder": _class_defaults("MusicgenMelodyDecoderConfig")},
                              model_class="MusicgenMelodyForConditionalGeneration",
                              inputs=lambda out, **kw: _chroma(_musicgen(out, **kw), **kw)),
    "rag": Family("no default parts: DPR question encoder, BART generator; retrieved contexts given as inputs "
                  "(no retriever)", {"n_docs": 2}, base_config=lambda: {
                      "question_encoder": _defaults("dpr"), "generator": _defaults("bart")}, model_class="RagModel",
                  inputs=_rag),
    "phi4_multimodal": Family("the default config has no vision and audio parts, which the model requires",
                              base_config=lambda: {"vision_config": _class_defaults("Phi4MultimodalVisionConfig"),
                                                   "audio_config": _class_defaults("Phi4MultimodalAudioConfig")}),
    # ---- model class: a type whose base model has no forward or needs a sub-config
    "speecht5": Family("the base model has no pre-net: it takes hidden states", model_class="SpeechT5ForSpeechToText"),
    "perceiver": Family("the base model takes preprocessed inputs", model_class="PerceiverForMaskedLM"),
    "bark": Family("BarkModel only generates; its semantic model is a causal LM", model_class="BarkSemanticModel",
                   subconfig="semantic_config"),
}
