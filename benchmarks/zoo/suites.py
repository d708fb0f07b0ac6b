"""What a zoo worker runs: a *suite* of rows, each a :class:`Case` (a model, its inputs, its loss).

Suites:

* ``transformers``: every model type of the installed transformers (the zoo proper, :mod:`benchmarks.zoo.specs`);
* ``torchvision``, ``timm``, ``diffusers``, ``torch_geometric``: one model per builder of each library's
  model zoo, small inputs, random weights (:mod:`benchmarks.zoo.libraries`);
* ``repos``: public model repositories checked out in a folder, one driver each (:mod:`benchmarks.zoo.repos`).

The parent (no torch) needs of a suite only its rows and what a repaired source copies: a package that is
imported (``package``), or the folder of checkouts (``repos``). The worker asks :func:`load` for the suite
and calls ``case(name, mode, dtype, profile)`` per row.

A row in training mode (``mode="train"``) is the model in ``train()``; its loss is the model's own where
the head takes labels (transformers: a language-model, sequence-to-sequence, CTC or classification head
when the type has one, with labels made from the inputs), else the mean square of its outputs.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MODES = ("eval", "train")
LIBRARY_SUITES = ("torchvision", "timm", "diffusers", "torch_geometric")
SUITES = ("transformers", *LIBRARY_SUITES, "repos")
# the rows of the library corpora kept aside while repairs are built (benchmarks/corpus/held_out.json): a third
# of each corpus first run after that rule (timm, diffusers), chosen by the SHA-256 of ``suite:row`` (the
# lowest third), written once before any of their results; torchvision and torch_geometric were built on before
# the rule and hold none out; the repositories name theirs in the manifest
HELD_OUT_FILE = Path(__file__).resolve().parents[1] / "corpus" / "held_out.json"


@dataclass
class Case:
    """One row ready to run: ``model(*args, **kwargs)``; ``loss(output) -> (tensor, kind)`` in training."""

    model: Any
    args: tuple = ()
    kwargs: dict[str, Any] = field(default_factory=dict)
    loss: Callable[[Any], Any] | None = None  # None: benchmarks.zoo.train.loss_of
    model_class: str = ""
    note: str = ""  # how the row was made where it matters (a training head that did not build...)
    fallback: Callable[[], Case] | None = None  # another way to run the row when this one raises in eager

    def call(self, fn: Any) -> Any:
        return fn(*self.args, **self.kwargs)


def package_of(suite: str) -> str | None:
    """The import name whose folder a suite's sources copy (None: ``repos``, a folder of checkouts)."""
    if suite not in SUITES:
        raise ValueError(f"unknown suite {suite!r}; choose from {', '.join(SUITES)}")
    return None if suite == "repos" else suite


def rows(suite: str, root: str | Path | None = None) -> list[str]:
    """Every row of a non-transformers suite (the transformers zoo has its own specs)."""
    if suite == "repos":
        from benchmarks.zoo.repos import manifest_rows

        return manifest_rows()
    from benchmarks.zoo.libraries import rows as library_rows

    return library_rows(suite)


def held_out_rows(suite: str) -> set[str]:
    """The rows of a library suite kept aside while repairs are built (:data:`HELD_OUT_FILE`; the repositories'
    are the manifest's, :func:`benchmarks.zoo.repos.held_out`)."""
    return set(json.loads(HELD_OUT_FILE.read_text()).get(suite, []))


def third_by_hash(suite: str, names: Iterable[str]) -> list[str]:
    """The third of ``names`` (rounded down) whose SHA-256 of ``suite:name`` is lowest: the rule that chose
    :data:`HELD_OUT_FILE`'s rows."""
    ranked = sorted(names, key=lambda n: hashlib.sha256(f"{suite}:{n}".encode()).hexdigest())
    return sorted(ranked[:len(ranked) // 3])


def load(suite: str, root: str | None = None) -> Any:
    """The worker's side of a suite: ``.root`` (the folder whose files are the project) and ``.case()``."""
    if suite == "transformers":
        return TransformersSuite()
    if suite == "repos":
        from benchmarks.zoo.repos import ReposSuite

        if not root:
            raise ValueError("the repos suite needs the folder of checkouts (--root)")
        return ReposSuite(root)
    from benchmarks.zoo.libraries import LibrarySuite

    return LibrarySuite(suite)


def imported_root(package: str) -> str:
    mod = importlib.import_module(package)
    return str(Path(mod.__file__).resolve().parent)  # type: ignore[arg-type]


# ---- transformers

# task heads that take labels, tried in this order for a training row
TRAIN_HEADS = ("SEQ_TO_SEQ_CAUSAL_LM", "SPEECH_SEQ_2_SEQ", "IMAGE_TEXT_TO_TEXT", "VISION_2_SEQ", "CAUSAL_LM",
               "MASKED_LM", "CTC", "IMAGE_CLASSIFICATION", "AUDIO_CLASSIFICATION", "SEQUENCE_CLASSIFICATION")


def train_head(model_type: str) -> tuple[str, str] | None:
    """(head kind, class name) of the first :data:`TRAIN_HEADS` the type has, or None."""
    from transformers.models.auto import modeling_auto as auto

    for head in TRAIN_HEADS:
        name = getattr(auto, f"MODEL_FOR_{head}_MAPPING_NAMES", {}).get(model_type)
        if name:
            return head, name[0] if isinstance(name, (tuple, list)) else name
    return None


def labels_for(head: str, inputs: dict[str, Any], config: Any, batch: int) -> Any:
    """Labels for a head from the row's inputs (None where the inputs do not give them)."""
    import torch

    gen = torch.Generator().manual_seed(7)
    if head in ("SEQ_TO_SEQ_CAUSAL_LM", "SPEECH_SEQ_2_SEQ"):
        ids = inputs.get("decoder_input_ids", inputs.get("input_ids"))
        return None if ids is None else ids.clone()
    if head in ("CAUSAL_LM", "MASKED_LM", "IMAGE_TEXT_TO_TEXT", "VISION_2_SEQ"):
        ids = inputs.get("input_ids")
        return None if ids is None else ids.clone()
    if head == "CTC":
        vocab = int(getattr(config, "vocab_size", 0) or 8)
        return torch.randint(1, max(2, vocab), (batch, 3), generator=gen)
    labels = int(getattr(config, "num_labels", 2) or 2)
    return torch.randint(0, labels, (batch,), generator=gen)


class TransformersSuite:
    name = "transformers"

    def __init__(self) -> None:
        self.root = imported_root("transformers")

    def reset_messages(self) -> None:
        """Forget the ``warning_once`` messages already shown, so every phase starts as a fresh process."""
        from transformers.utils import logging as hf_logging

        once = getattr(hf_logging, "warning_once", None)
        if hasattr(once, "cache_clear"):
            once.cache_clear()

    def case(self, name: str, mode: str, dtype: str, profile: str) -> Case:
        from benchmarks.zoo.specs import family, spec_by_name

        spec = spec_by_name(name)
        if mode == "eval":
            return self._case(spec, dtype, profile, None)
        head = None if family(spec.model_type).model_class or family(spec.model_type).subconfig \
            else train_head(spec.model_type)
        plain = lambda: self._case(spec, dtype, profile, None, train=True)  # noqa: E731
        if head is None:
            return plain()
        try:
            case = self._case(dataclasses.replace(spec, model_class=head[1]), dtype, profile, head[0], train=True)
        except Exception as exc:  # the head does not build or its inputs cannot be made: the base model
            case = plain()
            case.note = f"{head[1]} did not build ({type(exc).__name__}); {case.model_class} with the outputs' loss"
            return case
        case.fallback = plain
        return case

    def _case(self, spec: Any, dtype: str, profile_name: str, head: str | None, train: bool = False) -> Case:
        from benchmarks.zoo.build import build_model, model_class_name, torch_dtype
        from benchmarks.zoo.inputs import make_inputs
        from benchmarks.zoo.profiles import profile

        p = profile(profile_name)
        model, config = build_model(spec, dtype, p)
        inputs = make_inputs(model, config, spec, p, torch_dtype(dtype))
        if head is not None:
            labels = labels_for(head, inputs, config, p.batch)
            if labels is None:
                raise ValueError(f"no labels for a {head} head from these inputs")
            inputs["labels"] = labels
        if train:
            model.train()
        return Case(model, kwargs=inputs, model_class=spec.model_class or model_class_name(spec.model_type))
