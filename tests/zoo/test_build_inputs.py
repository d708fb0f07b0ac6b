"""Specs, model building and input generation on real transformers types (small configs, random weights)."""

from __future__ import annotations

import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from benchmarks.zoo import build_model, make_inputs, model_types, profile, spec_by_name, specs  # noqa: E402
from benchmarks.zoo.inputs import InputError, special_ids  # noqa: E402
from benchmarks.zoo.specs import ModelSpec  # noqa: E402

TINY = profile("tiny")


def _run(name: str):
    spec = spec_by_name(name)
    model, config = build_model(spec, "fp32", TINY)
    inputs = make_inputs(model, config, spec, TINY)
    with torch.no_grad():
        out = model(**inputs)
    return model, config, inputs, out


def test_every_config_mapping_type_is_a_row_and_variants_follow_their_type():
    from transformers import CONFIG_MAPPING

    types = model_types()
    assert types == sorted(CONFIG_MAPPING.keys()) and len(types) >= 340
    rows = [s.name for s in specs(["phi3", "bert"])]
    assert rows == ["phi3", "phi3:longrope", "bert"]
    assert [s.name for s in specs(["phi3"], variants=False)] == ["phi3"]
    with pytest.raises(ValueError, match="unknown model type"):
        specs(["no_such_model"])
    with pytest.raises(ValueError, match="variants of phi3: phi3:longrope"):
        specs(["phi3:nope"])


def test_text_model_is_small_and_its_ids_avoid_special_tokens():
    model, config, inputs, out = _run("bert")
    assert sum(p.numel() for p in model.parameters()) < 1_000_000
    ids = inputs["input_ids"]
    assert ids.shape == (TINY.batch, TINY.seq) and int(ids.max()) < config.vocab_size
    assert not set(ids.flatten().tolist()) & special_ids(config)
    assert torch.equal(inputs["attention_mask"], torch.ones_like(ids))
    assert out.last_hidden_state.shape == (TINY.batch, TINY.seq, config.hidden_size)


def test_encoder_decoder_gets_decoder_ids():
    _, _, inputs, out = _run("t5")
    assert inputs["decoder_input_ids"].shape == (TINY.batch, TINY.decoder_seq)
    assert out.last_hidden_state.shape[1] == TINY.decoder_seq


def test_vision_audio_and_video_inputs_are_sized_from_the_config():
    _, config, inputs, _ = _run("vit")
    assert inputs["pixel_values"].shape == (TINY.batch, 3, TINY.image, TINY.image)
    _, config, inputs, _ = _run("whisper")
    assert inputs["input_features"].shape == (TINY.batch, config.num_mel_bins, 2 * config.max_source_positions)
    _, _, inputs, _ = _run("wav2vec2")
    assert inputs["input_values"].shape == (TINY.batch, TINY.audio_samples)
    _, config, inputs, _ = _run("videomae")
    assert inputs["pixel_values"].shape[:2] == (TINY.batch, config.num_frames)


def test_multimodal_text_holds_as_many_image_tokens_as_the_vision_tower_makes():
    model, config, inputs, out = _run("llava")  # the forward raises when the counts differ
    per_row = (inputs["input_ids"] == config.image_token_index).sum(dim=1)
    side = config.vision_config.image_size // config.vision_config.patch_size
    assert per_row.tolist() == [side * side] * TINY.batch


def test_variant_changes_the_config_and_the_inputs():
    spec = spec_by_name("big_bird:block_sparse")
    model, config = build_model(spec, "fp32", TINY)
    assert config.attention_type == "block_sparse" and config.block_size == 4
    assert make_inputs(model, config, spec, TINY)["input_ids"].shape[1] == 64
    _, config = build_model(spec_by_name("phi3:longrope"), "fp32", TINY)
    assert config.rope_scaling["type"] == "longrope" and len(config.rope_scaling["short_factor"]) == 8


def test_a_required_input_nobody_can_generate_is_a_clear_error():
    class Odd(torch.nn.Module):
        def forward(self, input_ids, mystery):
            return input_ids

    _, config = build_model(spec_by_name("bert"), "fp32", TINY)
    with pytest.raises(InputError, match="mystery"):
        make_inputs(Odd(), config, ModelSpec("bert"), TINY)


def test_dtype_casts_weights_and_float_inputs_only():
    spec = spec_by_name("bert")
    model, config = build_model(spec, "fp16", TINY)
    assert next(model.parameters()).dtype == torch.float16
    inputs = make_inputs(model, config, spec, TINY, torch.float16)
    assert inputs["input_ids"].dtype == torch.long
    vit = spec_by_name("vit")
    model, config = build_model(vit, "bf16", TINY)
    assert make_inputs(model, config, vit, TINY, torch.bfloat16)["pixel_values"].dtype == torch.bfloat16
