"""What the zoo runs: one :class:`ModelSpec` per transformers model type, plus one per variant.

A *variant* is a model type with a config option that changes which code runs (and where Dynamo breaks):
LongRoPE scaling in phi3, a Longformer window that does not divide the input, BigBird's block-sparse
attention on an input long enough to use it. Adding one is one line in :data:`VARIANTS`.

A *family* entry (:data:`FAMILIES`) holds what the generic machinery cannot guess for a model type: config
overrides after shrinking, a config for composite types that have no defaults, a model class, an input
builder. Every entry says why it is there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from benchmarks.zoo.families import FAMILIES, GENERIC, Family


@dataclass(frozen=True)
class ModelSpec:
    """One zoo row: a model type, optionally a variant of it (config and input overrides)."""

    model_type: str
    variant: str = ""
    config: Mapping[str, Any] = field(default_factory=dict)  # dotted path -> value (or callable of its dict)
    inputs: Mapping[str, Any] = field(default_factory=dict)  # input overrides: batch, seq, decoder_seq, ...
    model_class: str | None = None
    note: str = ""

    @property
    def name(self) -> str:
        return f"{self.model_type}:{self.variant}" if self.variant else self.model_type


def variant(model_type: str, name: str, note: str, inputs: Mapping[str, Any] | None = None, **config: Any) -> ModelSpec:
    return ModelSpec(model_type, name, config=config, inputs=inputs or {}, note=note)


def _longrope(d: dict[str, Any]) -> dict[str, Any]:
    half = (d.get("head_dim") or d["hidden_size"] // d["num_attention_heads"]) // 2
    return {"type": "longrope", "short_factor": [1.0] * half, "long_factor": [1.5] * half}


def _longrope_mscale(d: dict[str, Any]) -> dict[str, Any]:
    return {**_longrope(d), "short_mscale": 1.0, "long_mscale": 1.2, "original_max_position_embeddings": 8}


VARIANTS: list[ModelSpec] = [
    variant("phi3", "longrope", "LongRoPE scaling: a branch on the sequence length picks the factors",
            rope_scaling=_longrope, original_max_position_embeddings=8),
    variant("phimoe", "longrope", "LongRoPE scaling (its own form: scales and the original length inside)",
            rope_scaling=_longrope_mscale),
    variant("longformer", "pad", "attention window 6 does not divide 16 tokens: the input is padded (and logged)",
            attention_window=6),
    variant("led", "pad", "attention window 6 does not divide 16 tokens: the input is padded (and logged)",
            attention_window=6),
    variant("big_bird", "block_sparse", "block-sparse attention on an input long enough to use it",
            {"seq": 64}, attention_type="block_sparse", block_size=4, num_random_blocks=2),
    variant("bigbird_pegasus", "block_sparse", "block-sparse attention on an input long enough to use it",
            {"seq": 64}, attention_type="block_sparse", block_size=4, num_random_blocks=2),
    variant("mega", "chunking", "chunked attention: the input's shape is kept as a tensor and branched on",
            use_chunking=True, chunk_size=8),
]


def family(model_type: str) -> Family:
    return FAMILIES.get(model_type, GENERIC)


def model_types() -> list[str]:
    """Every model type of the installed transformers (``CONFIG_MAPPING``), sorted."""
    from transformers import CONFIG_MAPPING

    return sorted(CONFIG_MAPPING.keys())


def specs(names: list[str] | None = None, variants: bool = True) -> list[ModelSpec]:
    """Specs for the named types or rows (``"phi3"`` or ``"phi3:longrope"``); all types when ``names`` is None.

    With ``variants`` a type's variants follow its base row (unless rows were named one by one).
    """
    by_type: dict[str, list[ModelSpec]] = {}
    for v in VARIANTS:
        by_type.setdefault(v.model_type, []).append(v)
    known = set(model_types())
    out: list[ModelSpec] = []
    for name in names if names is not None else sorted(known):
        model_type, _, var = name.partition(":")
        if model_type not in known:
            raise ValueError(f"unknown model type {model_type!r} (transformers has {len(known)} types)")
        if var:
            match = [v for v in by_type.get(model_type, []) if v.variant == var]
            if not match:
                have = ", ".join(v.name for v in by_type.get(model_type, [])) or "none"
                raise ValueError(f"unknown variant {name!r} (variants of {model_type}: {have})")
            out += match
            continue
        out.append(ModelSpec(model_type))
        if variants:
            out += by_type.get(model_type, [])
    return out


def spec_by_name(name: str) -> ModelSpec:
    return specs([name], variants=False)[0]


InputBuilder = Callable[..., dict[str, Any]]

__all__ = ["ModelSpec", "VARIANTS", "family", "model_types", "specs", "spec_by_name", "variant", "InputBuilder"]
