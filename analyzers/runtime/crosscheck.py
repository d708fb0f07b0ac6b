"""Cross-check: run real models under the recorder and score the static analyzer against the truth.

For every model, the recorder runs one forward (``fast``: graphs run eagerly) with the model's source
folder declared as project (``source``), so breaks inside library code are attributed to their own
lines. The static analyzer (``mend check``'s engine) then reads the files Dynamo traced:

* a **recorded site** is a (file, line) where Dynamo broke the graph or skipped the frame, in a file
  of the project;
* a **static finding** counts when it is a break rule (not a recompile rule, MND4xx) and lies inside
  a function Dynamo traced during the run (code Dynamo never saw cannot be confirmed either way);
* **recall** = recorded sites that a static finding covers / recorded sites;
* **precision** = static findings on a recorded site / static findings.

Models: transformers architectures built from tiny configs with random weights (no download), and
the bundled ``examples/``.
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent.parent
EXAMPLES = REPO / "examples"

TINY = dict(
    hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=37, vocab_size=99,
    d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
    encoder_ffn_dim=37, decoder_ffn_dim=37, num_layers=2, num_heads=2, d_ff=37, d_kv=16,
    num_key_value_heads=2, max_position_embeddings=64, embedding_size=32, attention_window=4,
)


class CrosscheckError(Exception):
    """A model that cannot be built or run; the message says which and why."""


@dataclass
class ModelResult:
    name: str
    recorded: list[tuple[str, int, str]] = field(default_factory=list)  # (path, line, registry id)
    static: list[tuple[str, int, int, str]] = field(default_factory=list)  # (path, line, end, code)
    true_positive_sites: int = 0
    true_positive_findings: int = 0
    missed: list[tuple[str, int, str]] = field(default_factory=list)
    false_findings: list[tuple[str, int, str]] = field(default_factory=list)
    graphs: int = 0
    seconds: float = 0.0
    error: str | None = None


@dataclass
class CrosscheckResult:
    models: list[ModelResult]

    @property
    def recall(self) -> float:
        total = sum(len(m.recorded) for m in self.models)
        return sum(m.true_positive_sites for m in self.models) / total if total else 1.0

    @property
    def precision(self) -> float:
        total = sum(len(m.static) for m in self.models)
        return sum(m.true_positive_findings for m in self.models) / total if total else 1.0

    def to_json(self) -> str:
        return json.dumps(
            {
                "precision": round(self.precision, 4),
                "recall": round(self.recall, 4),
                "recorded_sites": sum(len(m.recorded) for m in self.models),
                "static_findings": sum(len(m.static) for m in self.models),
                "models": [asdict(m) for m in self.models],
            },
            indent=2,
        )


# --------------------------------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------------------------------
Builder = Callable[[], tuple[Callable[[], Any], int, list[str]]]  # -> (step, calls, source folders)


def _transformers(model_type: str, **overrides: Any) -> Builder:
    def build() -> tuple[Callable[[], Any], int, list[str]]:
        import torch
        import transformers
        from transformers import AutoConfig, AutoModel

        config = AutoConfig.for_model(model_type, **{**TINY, **overrides})
        torch.manual_seed(0)
        model = AutoModel.from_config(config).eval()
        ids = torch.randint(1, 90, (2, 8))
        mask = torch.ones(2, 8, dtype=torch.long)
        mask[1, 6:] = 0
        kwargs: dict[str, Any] = {"input_ids": ids, "attention_mask": mask}
        if getattr(config, "is_encoder_decoder", False):
            kwargs["decoder_input_ids"] = ids
        compiled = torch.compile(model, backend="eager")

        def step() -> Any:
            with torch.no_grad():
                return compiled(**kwargs)

        return step, 1, [str(Path(transformers.__file__).parent)]

    return build


def _example(module_name: str) -> Builder:
    def build() -> tuple[Callable[[], Any], int, list[str]]:
        import importlib

        import torch

        if str(EXAMPLES) not in sys.path:
            sys.path.insert(0, str(EXAMPLES))
        module = importlib.import_module(module_name)
        target, args, kwargs = module.harness()
        if not hasattr(target, "_torchdynamo_orig_callable"):  # train_step is compiled by its decorator
            target = torch.compile(target, backend="eager")
        return (lambda: target(*args, **kwargs)), 4, [str(EXAMPLES)]

    return build


MODELS: dict[str, Builder] = {
    "tf:longformer": _transformers("longformer"),
    "tf:led": _transformers("led"),
    "tf:big_bird": _transformers("big_bird"),
    # architectures that compile whole in eval mode on torch 2.13: every static finding on a line
    # Dynamo traced in them is a false positive
    "tf:bart": _transformers("bart"),
    "tf:gpt2": _transformers("gpt2", n_embd=32, n_layer=2, n_head=2, n_positions=64),
    "tf:bert": _transformers("bert"),
    "tf:llama": _transformers("llama"),
    "tf:mistral": _transformers("mistral"),
    "tf:albert": _transformers("albert"),
    "examples:transformer_block": _example("transformer_block"),
    "examples:validated_model": _example("validated_model"),
    "examples:item_loss": _example("item_loss"),
    "examples:step_counter": _example("step_counter"),
    "examples:train_step": _example("train_step"),
}


def _run_one(name: str) -> tuple[Any, list[str]]:
    """Run one model under the recorder; returns (recorder, source folders)."""
    from mend.analyzers.runtime.recorder import Recorder

    try:
        step, calls, source = MODELS[name]()
    except Exception as exc:
        raise CrosscheckError(f"{name}: building the model failed: {type(exc).__name__}: {exc}") from exc
    import contextlib

    # the models' own output goes to stderr, so that `--format json` stays parseable
    with Recorder(source=source, fast=True, track_lines=True) as rec, warnings.catch_warnings(), \
            contextlib.redirect_stdout(sys.stderr):
        warnings.simplefilter("ignore")
        for _ in range(calls):
            step()
    return rec, source


def _static_findings(files: list[str], folders: list[str]) -> list[Any]:
    """``mend check`` on the traced files, plus whole source folders that are small projects.

    A project folder (the examples) is checked as a whole, as a user would run ``mend check``: its
    compile call sites (``run_all.py``) tell the analyzer which functions are compiled. Library
    folders (transformers) are too large; only the files Dynamo traced are read.
    """
    from mend.analyzers.static import check_paths, load_config

    paths = list(files)
    for folder in folders:
        if len(list(Path(folder).rglob("*.py"))) <= 50:
            paths.append(folder)
    config = load_config(paths, isolated=True)
    return list(check_paths(paths, config, jobs=1, use_cache=False).diagnostics)


def score(name: str, rec: Any, source: list[str]) -> ModelResult:
    result = ModelResult(name=name, graphs=rec.graphs)
    root = Path(rec.filter.root)

    def absolute(path: str) -> str:
        p = Path(path)
        return os.path.realpath(p if p.is_absolute() else root / p)

    recorded = {}
    for site in rec.breaks:
        if site.in_library:
            continue
        recorded[(absolute(site.path), site.line)] = site.registry_id or "-"
    traced: dict[str, list[tuple[int, int]]] = {}
    for filename, first, last, _ in rec.traced:
        if rec.filter.is_project(filename):
            traced.setdefault(os.path.realpath(filename), []).append((first, last))
    files = sorted({p for p, _ in recorded} | set(traced))
    diagnostics = _static_findings(files, source) if files else []
    lines = {(os.path.realpath(f), ln) for f, ln in rec.lines}
    findings = []
    for d in diagnostics:
        if d.code.startswith("MND4") or d.code.startswith("MND9"):
            continue  # recompile rules and runtime-only codes predict no break
        path = os.path.realpath(d.path if os.path.isabs(d.path) else Path.cwd() / d.path)
        end = d.end_line or d.line
        hit = any((path, ln) in recorded or (path, ln) in lines for ln in range(d.line, end + 1))
        if not hit:
            continue  # a line Dynamo never traced in this run (a branch not taken): cannot be judged
        findings.append((path, d.line, end, d.code))
    result.recorded = [(p, ln, gb) for (p, ln), gb in sorted(recorded.items())]
    result.static = sorted(set(findings))
    for path, line, gb in result.recorded:
        if any(p == path and first <= line <= end for p, first, end, _ in result.static):
            result.true_positive_sites += 1
        else:
            result.missed.append((path, line, gb))
    for path, first, end, code in result.static:
        if any(p == path and first <= line <= end for p, line, _ in result.recorded):
            result.true_positive_findings += 1
        else:
            result.false_findings.append((path, first, code))
    return result


def run(names: list[str] | None = None, data_file: Path | None = None) -> CrosscheckResult:
    unknown = [n for n in names or () if n not in MODELS]
    if unknown:
        raise CrosscheckError(f"unknown model(s) {', '.join(unknown)}; see `mend crosscheck --list`")
    results = []
    merged = None
    for name in names or list(MODELS):
        t0 = time.perf_counter()
        try:
            rec, source = _run_one(name)
        except CrosscheckError as exc:
            results.append(ModelResult(name=name, error=str(exc)))
            continue
        except Exception as exc:  # the model itself failed under compile: report, keep going
            results.append(ModelResult(name=name, error=f"{type(exc).__name__}: {exc}"[:500]))
            continue
        result = score(name, rec, source)
        result.seconds = round(time.perf_counter() - t0, 2)
        results.append(result)
        data = rec.data()
        merged = data if merged is None else merged.merge(data)
    if data_file is not None and merged is not None:
        from mend.analyzers.runtime.data import save

        save(merged, data_file)
    return CrosscheckResult(results)


def _short(path: str) -> str:
    for marker in ("site-packages/", str(REPO) + "/"):
        if marker in path:
            return path.split(marker, 1)[1]
    return path


def print_table(result: CrosscheckResult) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console()
    if not console.is_terminal:
        console = Console(width=150)
    table = Table(title="Static analyzer vs recorded graph breaks", title_justify="left")
    for col in ("Model", "Recorded sites", "Static findings", "Sites found", "Findings confirmed", "Graphs", "s"):
        table.add_column(col, justify="left" if col == "Model" else "right")
    for m in result.models:
        if m.error:
            table.add_row(m.name, "[red]error[/]", "", "", "", "", "")
            continue
        table.add_row(m.name, str(len(m.recorded)), str(len(m.static)), str(m.true_positive_sites),
                      str(m.true_positive_findings), str(m.graphs), f"{m.seconds:.1f}")
    console.print(table)
    for m in result.models:
        if m.error:
            console.print(f"[red]{m.name}[/]: {m.error}")
        for path, line, gb in m.missed:
            console.print(f"  missed by static  {m.name}: {_short(path)}:{line} [{gb}]")
        for path, line, code in m.false_findings:
            console.print(f"  not confirmed     {m.name}: {_short(path)}:{line} {code}")
    console.print(
        f"precision {result.precision:.3f} (target >= 0.95), recall {result.recall:.3f} (target >= 0.90) over "
        f"{sum(len(m.recorded) for m in result.models)} recorded site(s) and "
        f"{sum(len(m.static) for m in result.models)} static finding(s) in traced code"
    )
