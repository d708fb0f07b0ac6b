"""The model zoo: every transformers model type built from a shrunk config, run original vs repaired.

The zoo is what mend is measured on: break sites and reasons (runtime truth for ``mend check``), the reach
of ``mend fix`` (breaks before -> after, per reason class) and its safety (eager outputs unchanged).

    from benchmarks import zoo
    zoo.model_types()                               # every CONFIG_MAPPING type of the installed transformers
    specs = zoo.specs(["bert", "phi3:longrope"])    # rows: types and variants
    model, config = zoo.build_model(specs[0], "fp32", "tiny")
    inputs = zoo.make_inputs(model, config, specs[0], zoo.profile("tiny"))
    records = zoo.run_zoo(specs, sources=("original", "safe"), jobs=2)   # list[Record]
    zoo.reason_class("Data-dependent branching")    # -> "data-dependent branching"

Nothing here imports torch or transformers at import time.
"""

from __future__ import annotations

from typing import Any

from benchmarks.zoo.profiles import PROFILES, Profile, profile
from benchmarks.zoo.reasons import REASON_CLASSES, reason_class
from benchmarks.zoo.specs import VARIANTS, ModelSpec, model_types, spec_by_name, specs


def build_model(spec: ModelSpec, dtype: str = "fp32", p: Profile | str = "tiny", seed: int = 0) -> tuple[Any, Any]:
    from benchmarks.zoo.build import build_model as _build

    return _build(spec, dtype, p, seed)


def make_inputs(model: Any, config: Any, spec: ModelSpec, p: Profile | str = "tiny", dtype: Any = None) -> dict:
    from benchmarks.zoo.inputs import make_inputs as _make

    return _make(model, config, spec, profile(p) if isinstance(p, str) else p, dtype)


def run_zoo(*args: Any, **kwargs: Any) -> list:
    from benchmarks.zoo.runner import run_zoo as _run

    return _run(*args, **kwargs)


__all__ = ["PROFILES", "Profile", "profile", "REASON_CLASSES", "reason_class", "VARIANTS", "ModelSpec",
           "model_types", "spec_by_name", "specs", "build_model", "make_inputs", "run_zoo"]
