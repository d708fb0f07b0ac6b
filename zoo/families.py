"""Per-family knowledge: only what the generic shrinker and input generator get wrong, each with its reason.

A :class:`Family` can carry config overrides (dotted paths, applied after shrinking), a ``base_config`` for
composite types whose config has no defaults, a model class, and an input hook that edits the generated
inputs (``inputs(inputs, model, config, profile, gen) -> inputs``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Family:
    config: Mapping[str, Any] = field(default_factory=dict)
    base_config: Callable[[], dict[str, Any]] | None = None
    model_class: str | None = None
    inputs: Callable[..., dict[str, Any]] | None = None
    why: str = ""


FAMILIES: dict[str, Family] = {}
