"""The generic config shrinker on plain dicts (no transformers import) and on real default configs."""

from __future__ import annotations

import pytest

from benchmarks.zoo.profiles import profile
from benchmarks.zoo.shrink import IfPresent, apply_overrides, shrink, token_ids

TINY = profile("tiny")


def test_caps_sizes_at_the_profile_and_never_grows_them():
    d = {"model_type": "x", "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
         "intermediate_size": 11008, "vocab_size": 32000, "max_position_embeddings": 4096, "type_vocab_size": 2,
         "layer_norm_eps": 1e-5, "hidden_dropout_prob": 0.1}
    out = shrink(d, TINY)
    assert out == {**d, "hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 128,
                   "vocab_size": 256, "max_position_embeddings": 512}
    assert d["hidden_size"] == 4096  # the input is not changed


def test_grouped_query_attention_stays_grouped_and_multi_head_stays_multi_head():
    gqa = shrink({"model_type": "x", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8}, TINY)
    assert (gqa["num_attention_heads"], gqa["num_key_value_heads"]) == (4, 2)
    mha = shrink({"model_type": "x", "hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 32}, TINY)
    assert mha["num_key_value_heads"] == mha["num_attention_heads"] == 4


def test_heads_are_made_to_divide_the_hidden_size():
    out = shrink({"model_type": "x", "hidden_size": 50, "num_attention_heads": 16}, TINY)
    assert out["hidden_size"] == 50 and out["num_attention_heads"] == 2  # the largest divisor of 50 up to 4


def test_per_layer_lists_are_cut_and_layer_indices_moved_inside():
    d = {"model_type": "x", "num_hidden_layers": 12, "layer_types": ["full", "sliding"] * 6,
         "global_attn_indexes": [2, 5, 8, 11], "attention_window": [512] * 12}
    out = shrink(d, TINY)
    assert out["layer_types"] == ["full", "sliding"]
    assert out["global_attn_indexes"] == [1]
    assert out["attention_window"] == [TINY.window, TINY.window]


def test_a_cut_list_of_layer_kinds_keeps_every_kind():
    kinds = ["linear"] * 3 + ["full"] + ["linear"] * 4
    assert shrink({"model_type": "x", "num_hidden_layers": 8, "layer_types": kinds}, TINY)["layer_types"] == [
        "linear", "full"]


def test_backbone_out_indices_keep_their_count_and_stage_names_are_recomputed():
    d = {"model_type": "dinov2", "num_hidden_layers": 12, "out_indices": [3, 6, 9, 12],
         "out_features": ["stage3", "stage6", "stage9", "stage12"], "stage_names": ["stem"] + [f"stage{i}" for i in range(1, 13)]}
    out = shrink(d, TINY)
    assert out["num_hidden_layers"] == 4 and out["out_indices"] == [1, 2, 3, 4]
    assert out["out_features"] is None and "stage_names" not in out


def test_hierarchical_models_keep_their_stages_with_depth_one():
    d = {"model_type": "swin", "embed_dim": 96, "depths": [2, 2, 6, 2], "num_heads": [3, 6, 12, 24], "num_layers": 4,
         "hidden_sizes": [96, 192, 384, 768]}
    out = shrink(d, TINY)
    assert out["depths"] == [1, 1, 1, 1] and out["num_heads"] == [2, 2, 2, 2]
    assert out["num_layers"] == 4  # the stage count, not layers
    assert out["hidden_sizes"] == [96, 192, 384, 768]  # widths are tied to stems and heads: kept


def test_special_token_ids_move_below_the_vocabulary_consistently_across_sub_configs():
    d = {"model_type": "llava", "image_token_index": 32000, "pad_token_id": 0,
         "text_config": {"model_type": "llama", "vocab_size": 32064, "bos_token_id": 1, "eos_token_id": [2, 32000]}}
    out = shrink(d, TINY)
    assert out["text_config"]["vocab_size"] == TINY.vocab
    assert out["image_token_index"] == TINY.vocab - 1
    assert out["text_config"]["eos_token_id"] == [2, TINY.vocab - 1]  # the same id maps to the same id
    assert all(i < TINY.vocab for i in token_ids(out))


def test_nested_sub_configs_are_shrunk_and_channel_lists_follow_their_width():
    d = {"model_type": "rt_detr", "d_model": 256, "encoder_hidden_dim": 256, "decoder_in_channels": [256, 256, 256],
         "vision_config": {"model_type": "vit", "hidden_size": 768, "num_hidden_layers": 12, "image_size": 224,
                           "patch_size": 16}}
    out = shrink(d, TINY)
    assert out["decoder_in_channels"] == [64, 64, 64]
    assert out["vision_config"]["hidden_size"] == 64 and out["vision_config"]["num_hidden_layers"] == 2
    assert (out["vision_config"]["image_size"], out["vision_config"]["patch_size"]) == (TINY.image, TINY.patch)


def test_options_needing_missing_packages_are_switched_off():
    out = shrink({"model_type": "detr", "use_timm_backbone": True, "backbone": "resnet50",
                  "backbone_kwargs": {"out_indices": [1, 2, 3, 4]}, "use_pretrained_backbone": True}, TINY)
    assert out["use_timm_backbone"] is False and out["backbone"] is None and out["backbone_kwargs"] is None
    assert out["use_pretrained_backbone"] is False


def test_a_timm_backbone_sub_config_becomes_the_transformers_backbone():
    timm = {"model_type": "timm_backbone", "backbone": "resnet50", "out_indices": [1, 2, 3, 4]}
    out = shrink({"model_type": "detr", "backbone_config": timm, "dtype": "bfloat16"}, TINY)
    assert out["backbone_config"] == {"model_type": "resnet", "out_features": ["stage4"]}
    assert out["dtype"] == "float32"  # transformers 5's name of torch_dtype


def test_overrides_take_dotted_paths_and_callables():
    d = {"model_type": "x", "text_config": {"model_type": "y", "vocab_size": 10}, "backbone_config": None}
    apply_overrides(d, {"text_config.rope_scaling": {"type": "default"}, "image_token_index": lambda top:
                        top["text_config"]["vocab_size"] - 1, "backbone_config.window_size": 2})
    assert d["text_config"]["rope_scaling"] == {"type": "default"} and d["image_token_index"] == 9
    assert d["backbone_config"] is None  # created only in the config's __init__: skipped


def test_an_if_present_override_sets_only_a_leaf_the_dict_has():
    d = {"model_type": "x", "layer_types": ["a", "a"]}
    apply_overrides(d, {"layer_types": IfPresent(["a", "b"]), "layers_block_type": IfPresent(["a", "b"])})
    assert d == {"model_type": "x", "layer_types": ["a", "b"]}


def test_real_profile_is_larger_than_tiny():
    real = profile("real")
    out = shrink({"model_type": "x", "hidden_size": 4096, "num_hidden_layers": 32}, real)
    assert out["hidden_size"] == 768 and out["num_hidden_layers"] == 4
    with pytest.raises(ValueError, match="unknown size profile"):
        profile("huge")
