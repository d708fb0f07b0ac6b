"""mend bench on real transformers models that break the graph: one summary table.

    python benchmarks/bench_models.py --device cuda --fixed-root DIR    # DIR holds a `mend fix`-ed transformers/
    python benchmarks/bench_models.py --device cuda --make-fixed DIR    # copy transformers to DIR, mend fix it
    python benchmarks/bench_models.py --device cpu --tiny               # a quick check on a CPU

Every model is built from a config with random weights (nothing is downloaded). The models were chosen
because they break the graph under torch.compile on torch 2.13 with transformers 5.23 *and* `mend fix
--unsafe-fixes` removes at least one of those breaks (measured with mend's runtime recorder,
backend="eager", the ``tiny`` harnesses below, no_grad; the choice came from a hand-picked survey of ~50
architectures, since replaced by the model zoo, ``python -m benchmarks.zoo``):

| model | graph breaks (original) | after `mend fix --unsafe-fixes` |
|---|---|---|
| xlm | 2 x ``assert lengths.max().item() <= slen`` (GB0124) | 0 breaks, 1 graph (was 4): ``assert lengths.max() <= slen`` |
| flaubert | the same two asserts (GB0124) | 0 breaks, 1 graph (was 4) |
| prophetnet | ``assert torch.all(shifted_input_ids >= 0).item(), "..."`` when shifting labels (GB0124) | 0 breaks, 1 graph (was 2) |
| longformer | ``logger.warning_once`` when it pads the input (GB0291); ``is_global_attn = ....any().item()`` (GB0124) | 1 break (the ``.item()``), 4 graphs (was 6) |
| led | the same two (GB0291, GB0124) | 1 break, 3 graphs (was 5) |

The assert repairs are *unsafe* (under compile a failing check raises ``RuntimeError`` from the in-graph
``torch._assert_async``); the logger guard is safe, so ``mend fix`` without ``--unsafe-fixes`` repairs
only the Longformer/LED break. Longformer's ``.item()`` feeds a Python ``if`` in every layer and has no
local rewrite. The window of Longformer/LED is chosen so that it does not divide the sequence length
(as for most real inputs), and transformers keeps its default log level, so the padding message is
logged (and breaks the graph) as it does for a user.

Each harness below (``xlm``, ``longformer``, ...) is a ``mend bench`` harness: it reads the size from
``MEND_BENCH_MODELS_SIZE`` (``tiny`` or ``small``) and the device from ``MEND_BENCH_DEVICE``. The driver
runs ``mend bench`` once per model (original against the ``--fixed-root`` copy, which shadows the
installed ``transformers`` on ``sys.path``), keeps each JSON result, and prints breaks before/after,
cold-start speedup and warm speedup for Inductor and mend, then writes the same table as markdown.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

from mend import settings

HERE = Path(__file__).resolve()
MODELS = ("xlm", "flaubert", "prophetnet", "longformer", "led")
TRANSFORMERS_DIRS = {  # model -> folder under transformers/models that `--make-fixed` repairs
    "xlm": "xlm",
    "flaubert": "flaubert",
    "prophetnet": "prophetnet",
    "longformer": "longformer",
    "led": "led",
}

# (hidden, layers, heads, ffn, batch, seq, vocab)
SIZES = {
    "tiny": dict(hidden=64, layers=2, heads=4, ffn=128, batch=2, seq=64, vocab=1000),
    "small": dict(hidden=512, layers=4, heads=8, ffn=2048, batch=8, seq=512, vocab=8000),
}


def _size() -> dict[str, int]:
    return SIZES[settings.BENCH_MODELS_SIZE.get()]


def _quiet() -> None:
    """Silence ``warnings.warn``; transformers keeps its default log level (warning), as for a user.

    A model that logs in ``forward`` (Longformer and LED when they pad the input) breaks the graph there
    only while the message is enabled: lowering the level would hide a break every user with the default
    level gets.
    """
    import warnings

    warnings.filterwarnings("ignore")


def _window(seq: int) -> tuple[int, int]:
    """A local-attention window (even) that does *not* divide ``seq``, and the padded length.

    Real inputs rarely have a length that is a multiple of the window: Longformer and LED then pad
    the input and log that they did.
    """
    window = max(2, (seq * 3 // 8) // 2 * 2)
    return window, -(-seq // window) * window


def _device() -> str:
    return settings.BENCH_DEVICE.get()


def _ids(s: dict[str, int], low: int = 3) -> Any:
    import torch

    g = torch.Generator().manual_seed(0)
    return torch.randint(low, s["vocab"], (s["batch"], s["seq"]), generator=g)


def _finish(model: Any, kwargs: dict[str, Any]) -> tuple[Any, tuple, dict[str, Any]]:
    dev = _device()
    model = model.eval().to(dev)
    return model, (), {k: v.to(dev) for k, v in kwargs.items()}


# ------------------------------------------------------------------------------------------------
# harnesses (path.py:function for mend bench)


def _xlm_family(config_cls: str, model_cls: str) -> tuple[Any, tuple, dict[str, Any]]:
    """XLM and FlauBERT share their configuration and their `.item()` asserts."""
    import torch
    import transformers as T

    _quiet()
    torch.manual_seed(0)
    s = _size()
    cfg = getattr(T, config_cls)(
        vocab_size=s["vocab"], emb_dim=s["hidden"], n_layers=s["layers"], n_heads=s["heads"],
        max_position_embeddings=max(512, s["seq"]), pad_index=2,
    )
    return _finish(getattr(T, model_cls)(cfg), {"input_ids": _ids(s)})


def xlm():
    return _xlm_family("XLMConfig", "XLMModel")


def longformer():
    import torch
    import transformers as T

    _quiet()
    torch.manual_seed(0)
    s = _size()
    window, padded = _window(s["seq"])
    cfg = T.LongformerConfig(
        vocab_size=s["vocab"], hidden_size=s["hidden"], num_hidden_layers=s["layers"],
        num_attention_heads=s["heads"], intermediate_size=s["ffn"], attention_window=window,
        max_position_embeddings=padded + 2, pad_token_id=1,
    )
    ids = _ids(s)
    return _finish(T.LongformerModel(cfg), {"input_ids": ids, "attention_mask": torch.ones_like(ids)})


def flaubert():
    return _xlm_family("FlaubertConfig", "FlaubertModel")


def led():
    import torch
    import transformers as T

    _quiet()
    torch.manual_seed(0)
    s = _size()
    window, padded = _window(s["seq"])
    cfg = T.LEDConfig(
        vocab_size=s["vocab"], d_model=s["hidden"], encoder_layers=s["layers"], decoder_layers=max(1, s["layers"] // 2),
        encoder_attention_heads=s["heads"], decoder_attention_heads=s["heads"], encoder_ffn_dim=s["ffn"],
        decoder_ffn_dim=s["ffn"], attention_window=window, max_encoder_position_embeddings=padded,
        max_decoder_position_embeddings=s["seq"], pad_token_id=1,
    )
    ids = _ids(s)
    return _finish(T.LEDModel(cfg), {"input_ids": ids, "attention_mask": torch.ones_like(ids),
                                     "decoder_input_ids": ids[:, : max(8, s["seq"] // 8)]})


def prophetnet():
    import torch
    import transformers as T

    _quiet()
    torch.manual_seed(0)
    s = _size()
    cfg = T.ProphetNetConfig(
        vocab_size=s["vocab"], hidden_size=s["hidden"], num_encoder_layers=s["layers"],
        num_decoder_layers=max(1, s["layers"] // 2), num_encoder_attention_heads=s["heads"],
        num_decoder_attention_heads=s["heads"], encoder_ffn_dim=s["ffn"], decoder_ffn_dim=s["ffn"], ngram=2,
        max_position_embeddings=max(512, s["seq"]), pad_token_id=0, decoder_start_token_id=2,
    )
    ids = _ids(s)
    # labels and no decoder inputs: the model builds them by shifting the labels right (a training-style call)
    return _finish(T.ProphetNetForConditionalGeneration(cfg), {"input_ids": ids, "labels": ids[:, : max(8, s["seq"] // 8)]})


# ------------------------------------------------------------------------------------------------
# driver


def _transformers_dir() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("transformers is not installed: pip install 'torch-mend[dev]'")
    return Path(list(spec.submodule_search_locations)[0])


def make_fixed(dest: Path, models: list[str], unsafe: bool = False) -> Path:
    """Copy the installed transformers into DEST/transformers and run `mend fix` on the models' folders."""
    src = _transformers_dir()
    target = dest / "transformers"
    if target.exists():
        print(f"using the existing copy {target} (delete it to copy again)")
    else:
        print(f"copying {src} -> {target}")
        shutil.copytree(src, target, ignore=shutil.ignore_patterns("__pycache__"))
    folders = [str(target / "models" / TRANSFORMERS_DIRS[m]) for m in models]
    cmd = [sys.executable, "-m", "mend.cli", "fix", *(["--unsafe-fixes"] if unsafe else []), *folders]
    print("$", " ".join(cmd))
    proc = subprocess.run(cmd, capture_output=True, text=True)
    print((proc.stdout + proc.stderr).strip()[-3000:])
    if proc.returncode not in (0, 1):
        raise SystemExit(f"`mend fix` failed with exit code {proc.returncode}; repair a copy yourself and pass --fixed-root")
    return dest


def _fmt_pair(pair: list[Any] | None) -> str:
    if not pair:
        return "-"
    return f"{'-' if pair[0] is None else pair[0]} -> {'-' if pair[1] is None else pair[1]}"


def _fmt_x(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}x"


def summarize(results: dict[str, dict[str, Any] | None], backends: list[str]) -> tuple[list[str], list[list[str]]]:
    head = ["model"]
    for b in backends:
        head += [f"{b} breaks", f"{b} cold speedup", f"{b} warm speedup", f"{b} x eager (orig -> rep)"]
    body = []
    for model, doc in results.items():
        row = [model]
        if doc is None:
            body.append(row + ["failed"] + [""] * (len(head) - 2))
            continue
        comps = {c["backend"]: c for c in doc.get("comparisons", [])}
        rows = {(r["variant"], r["backend"]): r for r in doc["results"]}
        for b in backends:
            c = comps.get(b)
            orig = rows.get(("original", b), {})
            rep = rows.get(("repaired", b), {})
            if c is None:
                status = orig.get("status") or "-"
                breaks = f"{orig.get('breaks')} -> ?" if orig.get("status") == "ok" else status
                row += [breaks, "-", "-", "-"]
                continue
            ve = [(r.get("ratios") or {}).get("latency_vs_eager") for r in (orig, rep)]
            row += [
                _fmt_pair(c["breaks"]), _fmt_x(c["cold_speedup"]), _fmt_x(c["warm_speedup"]),
                " -> ".join("-" if v is None else f"{v:.2f}" for v in ve),
            ]
        body.append(row)
    return head, body


def print_summary(out: Path, models: list[str], backends_arg: str | None, fixed: bool = True, size: str = "small") -> int:
    """Print and write (``summary.md``) the table of the JSON results in ``out``."""
    results: dict[str, dict[str, Any] | None] = {}
    for m in models:
        f = out / f"{m}.json"
        results[m] = json.loads(f.read_text()) if f.is_file() else None
    first = next((d for d in results.values() if d), None)
    if first is None:
        print(f"no result in {out}/")
        return 1
    backends = backends_arg.split(",") if backends_arg else first["settings"]["backends"]
    started = datetime.fromisoformat(first["created"])
    shown = [b for b in backends if b != "eager"]
    head, body = summarize(results, shown)
    dev_name = f"{first['device']['type']}: {first['device']['name']}"
    title = (f"mend bench on transformers models ({size} configs), {dev_name}, "
             f"torch {first['torch_version']}, {started.date().isoformat()}")
    try:
        from rich.console import Console
        from rich.table import Table

        t = Table(title=title, title_justify="left",
                  caption="breaks: original -> repaired; speedups: original / repaired time (above 1: the repair "
                  "helped); x eager: warm latency / eager latency of the same variant", caption_justify="left")
        for h in head:
            t.add_column(h, justify="left" if h == "model" else "right")
        for row in body:
            t.add_row(*row)
        Console(width=max(160, 40 * len(shown))).print(t)
    except ImportError:
        print(title)
        for row in [head, *body]:
            print(" | ".join(row))
    md = [f"**{title}**", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    md += ["| " + " | ".join(r) + " |" for r in body]
    if not fixed:
        md += ["", "No --fixed-root: only the original variant ran."]
    (out / "summary.md").write_text("\n".join(md) + "\n")
    print(f"\nwrote {out / 'summary.md'} and one JSON result per model in {out}/")
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--device", default="auto", help="cpu, cuda or auto")
    p.add_argument("--fixed-root", type=Path, help="folder holding a `mend fix`-ed copy of transformers/ (shadows the installed one)")
    p.add_argument("--make-fixed", type=Path, help="copy the installed transformers here and run `mend fix` on the models")
    p.add_argument("--unsafe-fixes", action="store_true", help="--make-fixed: run `mend fix --unsafe-fixes`")
    p.add_argument("--models", default=",".join(MODELS), help=f"comma-separated, from {', '.join(MODELS)}")
    p.add_argument("--tiny", action="store_true", help="tiny configs (a quick CPU check); default: small-but-not-tiny")
    p.add_argument("--backends", default=None, help="comma-separated mend bench backends (default: eager,inductor,mend "
                   "plus inductor-reduce-overhead on CUDA)")
    p.add_argument("--rounds", type=int, default=None)
    p.add_argument("--calls", type=int, default=None)
    p.add_argument("--warmup", type=int, default=None)
    p.add_argument("--dtype", default=None, help="float32, float16 or bfloat16 (default: float32)")
    p.add_argument("--out", type=Path, default=Path("bench-models"), help="folder for the JSON results and summary.md")
    p.add_argument("--summary-only", action="store_true",
                   help="run nothing: print the table of the results already in --out (runs split over several commands)")
    args = p.parse_args(argv)
    if args.summary_only:
        return print_summary(args.out, [m for m in MODELS if (args.out / f"{m}.json").is_file()], args.backends,
                             size="tiny" if args.tiny else "small")

    models = [m.strip() for m in args.models.split(",") if m.strip()]
    bad = [m for m in models if m not in MODELS]
    if bad:
        p.error(f"unknown model {', '.join(bad)}; choose from {', '.join(MODELS)}")
    fixed = args.fixed_root
    if args.make_fixed:
        fixed = make_fixed(args.make_fixed, models, unsafe=args.unsafe_fixes)
    if fixed is not None and not (fixed / "transformers" / "__init__.py").is_file():
        p.error(f"--fixed-root {fixed}: no transformers/__init__.py there")
    device = args.device
    if device == "auto":
        import torch

        device = "cuda" if torch.cuda.is_available() else "cpu"
    tiny = args.tiny
    rounds = args.rounds or (3 if tiny else 10)
    calls = args.calls or (3 if tiny else 10)
    warmup = args.warmup if args.warmup is not None else (1 if tiny else 3)
    backends = (args.backends.split(",") if args.backends else
                ["eager", "inductor"] + (["inductor-reduce-overhead"] if device == "cuda" else []) + ["mend"])
    args.out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, **{settings.BENCH_MODELS_SIZE.name: "tiny" if tiny else "small"})
    ok = True
    for m in models:
        out = args.out / f"{m}.json"
        cmd = [sys.executable, "-m", "mend.cli", "bench", f"{HERE}:{m}", "--device", device,
               "--rounds", str(rounds), "--calls", str(calls), "--warmup", str(warmup), "--json", str(out)]
        cmd += ["--fixed", str(fixed)] if fixed else ["--no-repair"]
        for b in backends:
            cmd += ["-b", b]
        if args.dtype:
            cmd += ["--dtype", args.dtype]
        print(f"\n=== {m}: {' '.join(cmd[2:])}", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, env=env, text=True)
        print(f"=== {m}: exit {proc.returncode} after {time.perf_counter() - t0:.0f} s", flush=True)
        ok = ok and proc.returncode == 0
        if proc.returncode not in (0, 1) and out.is_file():
            out.unlink()  # a result from an earlier run must not pass for this one

    print_summary(args.out, models, ",".join(backends), fixed=bool(fixed), size="tiny" if tiny else "small")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
