"""The bundled compiler on real models at the sizes users run: eager vs Inductor vs mend, side by side.

    python benchmarks/compiler_gpu_zoo.py --device cuda --dtype bf16|fp16|fp32 [--models a,b] [--out DIR]
                                          [--budget-s S] [--deadline-s S] [--jobs N] [--size real|tiny]
                                          [--compilers inductor,mend] [--profile]
                                          [--sizes 1x128,8x512,64x2048] [--no-cudagraphs] [--no-async]
    python benchmarks/compiler_gpu_zoo.py --dtype fp32 --show part1.json,part2.json   (one table of parts)
    python benchmarks/compiler_zoo.py --device cuda ...            (the same: the GPU zoo)

Transformers architectures (:data:`MODELS`: decoders, encoders, encoder-decoders, vision, speech) built from
configs through public APIs only (``AutoConfig.for_model``, ``AutoModel.from_config``, the model's
``get_encoder()``), random weights, sdpa attention where the model has it and its default otherwise (the
``attn`` column). ``--size real``: hidden 768, 4 layers, batch 8 x 512 tokens (encoder-decoders: 128 decoder tokens), 16 images of 224, 8 x 3000 audio
frames; ``tiny`` checks the builders on a CPU. Rows ending in ``:train`` time a training step instead
(forward, backward of ``mean(output * a fixed random tensor)``, AdamW step; dropout off). A row may name
its size: ``bert@64x2048`` (batch x tokens), ``vit@16x384`` (images x image side), ``whisper@8x3000``
(batch x frames), ``bert@8x512:train``; ``--sizes`` makes one row per model and size (the size sweep).

Each model runs in its own process. Per model, in this order: eager (reference output); cold compile and
first result of mend and of Inductor (default mode), each with empty caches (the process's one-time costs,
imports and compile workers, are paid first on a small unrelated graph by both) and after a full garbage
collection (with a model and Dynamo's state loaded, a full collection takes 0.3-0.5 s and otherwise lands in
whichever compile's allocations cross the collector's threshold: in this order, mend's); warm runtime of eager,
Inductor and mend in interleaved rounds (median of round medians; the m/i column is the median of the
per-round ratios with its 95% bootstrap interval and a verdict, ``mend.bench.stats``), after mend's
background tuning of
half-precision matrix products has its kernels built (``mend_tuning_wait_s`` in the raw results; the
difference from eager is checked again once the tuned kernels run); both with CUDA graphs (mend's
``mode="reduce-overhead"`` against Inductor's); mend's first result with ``async_compile`` (empty mend
caches). Correctness: the largest absolute difference of the first output from eager's, for each compiler;
mend's verdict is ``ok`` when it is within twice Inductor's difference (or within 1e-5 of the output's
scale in fp32, 1e-2 in fp16 and bf16): the tolerance Inductor meets. A row also counts what fell back
(graphs run eagerly, kernels interpreted, compiled graphs that failed at run time).

Several model processes run at once (``--jobs``, default 2): imports and model building overlap, while
everything else (the warm-up, which starts compile workers, and everything timed) holds one lock, so no two
timed regions share the GPU or the CPUs. ``--budget-s``: no model starts after that many seconds (the rest are listed as skipped), and
``--deadline-s`` stops a model process still running then, so a run fits a time limit. ``--profile`` adds
each compiler's longest GPU kernels per model to the raw results (where mend trails, what to look at) and
a table of each warm call's GPU time by kind of kernel: library (cuBLAS, cuDNN, attention: called alike by
both compilers), matmul templates, other generated kernels, ATen, copies, with the floor mend's matrix
products set on its runtime ratio.
``--out DIR``: ``zoo_<dtype>.json`` (raw results, with the round medians and mend's tuning records: each
matrix-product kernel's candidates and their times) and ``zoo_<dtype>.txt`` (the table).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve()
DTYPES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


@dataclass(frozen=True)
class Size:
    hidden: int
    heads: int
    kv_heads: int
    layers: int
    intermediate: int
    vocab: int
    batch: int
    seq: int
    decoder_seq: int
    images: int
    image: int
    patch: int
    frames: int


SIZES = {
    "real": Size(hidden=768, heads=12, kv_heads=4, layers=4, intermediate=3072, vocab=32000, batch=8, seq=512,
                 decoder_seq=128, images=16, image=224, patch=16, frames=3000),
    "tiny": Size(hidden=64, heads=4, kv_heads=2, layers=2, intermediate=128, vocab=256, batch=2, seq=16,
                 decoder_seq=8, images=2, image=64, patch=16, frames=64),
}
NO_DROPOUT = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _decoder(s: Size, **extra) -> dict:
    return dict(hidden_size=s.hidden, num_hidden_layers=s.layers, num_attention_heads=s.heads,
                num_key_value_heads=s.kv_heads, intermediate_size=s.intermediate, vocab_size=s.vocab,
                max_position_embeddings=max(2048, s.seq), use_cache=False, attention_dropout=0.0, **extra)


def _encoder(s: Size, **extra) -> dict:
    return dict(hidden_size=s.hidden, num_hidden_layers=s.layers, num_attention_heads=s.heads,
                intermediate_size=s.intermediate, vocab_size=s.vocab, max_position_embeddings=s.seq + 2,
                **NO_DROPOUT, **extra)


def _seq2seq_bart(s: Size) -> dict:
    return dict(d_model=s.hidden, encoder_layers=s.layers, decoder_layers=s.layers, encoder_attention_heads=s.heads,
                decoder_attention_heads=s.heads, encoder_ffn_dim=s.intermediate, decoder_ffn_dim=s.intermediate,
                vocab_size=s.vocab, max_position_embeddings=max(s.seq, s.decoder_seq), use_cache=False,
                dropout=0.0, attention_dropout=0.0, activation_dropout=0.0)


def _vision_stages(s: Size) -> tuple:
    """(embedding width, widths of four stages) of the hierarchical vision models: the last stage as wide as
    ``hidden``, one block per stage (four layers)."""
    e = s.hidden // 8
    return e, [e, 2 * e, 4 * e, 8 * e]


CONFIGS = {
    "gpt2": lambda s: dict(n_embd=s.hidden, n_layer=s.layers, n_head=s.heads, n_inner=s.intermediate,
                           vocab_size=s.vocab, n_positions=max(1024, s.seq), use_cache=False, resid_pdrop=0.0,
                           embd_pdrop=0.0, attn_pdrop=0.0),
    "llama": lambda s: _decoder(s),
    "mistral": lambda s: _decoder(s, sliding_window=None),
    "qwen2": lambda s: _decoder(s),
    "gemma": lambda s: _decoder(s, head_dim=s.hidden // s.heads),
    "phi": lambda s: dict(_decoder(s), resid_pdrop=0.0, embd_pdrop=0.0),
    "bert": lambda s: _encoder(s),
    "roberta": lambda s: _encoder(s, pad_token_id=1),
    "deberta-v2": lambda s: _encoder(s),
    "t5": lambda s: dict(d_model=s.hidden, d_ff=s.intermediate, d_kv=s.hidden // s.heads, num_layers=s.layers,
                         num_decoder_layers=s.layers, num_heads=s.heads, vocab_size=s.vocab, use_cache=False,
                         dropout_rate=0.0),
    "bart": _seq2seq_bart,
    "vit": lambda s: dict(hidden_size=s.hidden, num_hidden_layers=s.layers, num_attention_heads=s.heads,
                          intermediate_size=s.intermediate, image_size=s.image, patch_size=s.patch, **NO_DROPOUT),
    "swin": lambda s: dict(embed_dim=_vision_stages(s)[0], depths=[1, 1, 1, 1],
                           num_heads=[max(1, w // 32) for w in _vision_stages(s)[1]], image_size=s.image,
                           patch_size=4, window_size=s.image // 32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                           drop_path_rate=0.0),
    "convnext": lambda s: dict(hidden_sizes=_vision_stages(s)[1], depths=[1, 1, 1, 1], image_size=s.image,
                               drop_path_rate=0.0),
    "whisper": lambda s: dict(d_model=s.hidden, encoder_layers=s.layers, decoder_layers=1,
                              encoder_attention_heads=s.heads, decoder_attention_heads=s.heads,
                              encoder_ffn_dim=s.intermediate, decoder_ffn_dim=s.intermediate, num_mel_bins=80,
                              max_source_positions=s.frames // 2, vocab_size=s.vocab, pad_token_id=0,
                              bos_token_id=0, eos_token_id=0, decoder_start_token_id=0, dropout=0.0,
                              attention_dropout=0.0, activation_dropout=0.0, use_cache=False),
}
KINDS = {"gpt2": "decoder", "llama": "decoder", "mistral": "decoder", "qwen2": "decoder", "gemma": "decoder",
         "phi": "decoder", "bert": "encoder", "roberta": "encoder", "deberta-v2": "encoder", "t5": "seq2seq",
         "bart": "seq2seq", "vit": "vision", "swin": "vision", "convnext": "vision", "whisper": "speech"}
# the order a run takes them in (a budget cuts the tail): the models of the first report first
INFERENCE = ("gpt2", "llama", "mistral", "bert", "t5", "vit", "bart", "whisper", "qwen2", "gemma", "phi",
             "roberta", "deberta-v2", "swin", "convnext")
TRAINING = ("gpt2:train", "bert:train", "vit:train")
# rows ending in ``:lm``: the model with its language-model head at its real vocabulary, whose rows are not
# 16-byte aligned (the other rows use an aligned 32000)
LM_VOCAB = {"gpt2": 50257, "bert": 30522}
LM = tuple(f"{m}:lm" for m in LM_VOCAB)
MODELS = INFERENCE + TRAINING + LM
ATTENTION = ("sdpa", None)  # the attention implementations asked for, in order (None: the model's default)


# --------------------------------------------------------------------------------------- building


def parse_row(row: str, base: Size) -> tuple[str, Size, bool, bool]:
    """``model[@AxB][:train|:lm]`` -> (model, size, train, lm). ``AxB`` is batch x tokens for text, images x
    image side for vision, batch x frames for speech (:data:`KINDS`)."""
    import dataclasses

    head, _, tail = row.partition(":")
    name, _, dims = head.partition("@")
    size = base
    if dims:
        a, _, b = dims.partition("x")
        if not (a.isdigit() and b.isdigit()):
            raise ValueError(f"row {row!r}: the size must be AxB (e.g. bert@8x512)")
        field = {"vision": ("images", "image"), "speech": ("batch", "frames")}.get(KINDS.get(name), ("batch", "seq"))
        size = dataclasses.replace(base, **{field[0]: int(a), field[1]: int(b)})
    return name, size, tail == "train", tail == "lm"


def build(name: str, size: Size, device: str, dtype, lm: bool = False):
    """(model, inputs dict) for ``name`` (a key of :data:`CONFIGS`), random weights (seed 0); ``lm``: with
    its language-model head, at the vocabulary of :data:`LM_VOCAB`."""
    import dataclasses

    import torch
    from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, AutoModelForMaskedLM

    if lm:
        size = dataclasses.replace(size, vocab=LM_VOCAB[name])
    auto = (AutoModelForCausalLM if KINDS[name] == "decoder" else AutoModelForMaskedLM) if lm else AutoModel
    for attention in ATTENTION:  # sdpa where the model has it, else its default (the row records which)
        torch.manual_seed(0)
        # a fresh config each time: transformers 5 leaves a refused implementation set on the config it got
        config = AutoConfig.for_model(name, **CONFIGS[name](size))
        try:
            model = auto.from_config(config, **({"attn_implementation": attention} if attention else {}))
            break
        except (ValueError, ImportError):
            if attention is None:
                raise
    if name == "whisper":
        model = model.get_encoder()
    model = model.to(device=device, dtype=dtype).eval()
    return model, inputs(name, size, device, dtype)


def inputs(name: str, s: Size, device: str, dtype) -> dict:
    import torch

    g = torch.Generator().manual_seed(1)
    kind = KINDS[name]
    if kind == "vision":
        return {"pixel_values": torch.randn(s.images, 3, s.image, s.image, generator=g).to(device, dtype)}
    if kind == "speech":
        return {"input_features": torch.randn(s.batch, 80, s.frames, generator=g).to(device, dtype)}
    ids = torch.randint(3, s.vocab, (s.batch, s.seq), generator=g).to(device)
    if kind == "seq2seq":
        dec = torch.randint(3, s.vocab, (s.batch, s.decoder_seq), generator=g).to(device)
        return {"input_ids": ids, "decoder_input_ids": dec}
    return {"input_ids": ids}


def first_tensor(out):
    import torch

    if isinstance(out, torch.Tensor):
        return out
    if isinstance(out, dict):
        out = list(out.values())
    for o in out:
        t = first_tensor(o) if not isinstance(o, torch.Tensor) else o
        if t is not None:
            return t
    return None


# ------------------------------------------------------------------------------------- measuring


class GpuLock:
    """Everything timed holds this lock (a file lock shared by the model processes of one run)."""

    def __init__(self, path: str | None) -> None:
        self.path = path

    @contextlib.contextmanager
    def held(self):
        if not self.path:
            yield
            return
        import fcntl

        with open(self.path, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)


def _sync(device):
    import torch

    if device == "cuda":
        torch.cuda.synchronize()


def _collected(device: str) -> None:
    """Before a timed compile: every queued GPU op done, and a full garbage collection."""
    import gc

    _sync(device)
    gc.collect()


def _fresh_caches(tag: str) -> None:
    """Empty cache directories for mend (and, at a process's start, Inductor and Triton)."""
    os.environ["MEND_CACHE_DIR"] = tempfile.mkdtemp(prefix=f"mend_zoo_{tag}_")


def _set_cache_limits() -> None:
    import torch._dynamo

    for k in ("cache_size_limit", "recompile_limit", "accumulated_cache_size_limit", "accumulated_recompile_limit"):
        if hasattr(torch._dynamo.config, k):
            setattr(torch._dynamo.config, k, 64)


def _warm_up(device: str, compilers) -> None:
    """The process's one-time costs of each compiler (imports, compile workers), on an unrelated graph."""
    import torch

    x = torch.randn(64, 64, device=device)
    for c in compilers:
        torch.compile(lambda x: torch.softmax(x * 2, -1) + 1, backend=c)(x)
    _sync(device)


_PROBES: dict = {}


def _probe(out):
    """A fixed random tensor of ``out``'s shape: the training loss ``mean(out * probe)`` has gradients of a
    useful size even where ``out`` is normalized (a mean square of a LayerNorm's output is constant)."""
    import torch

    key = (tuple(out.shape), out.device)
    if key not in _PROBES:
        _PROBES[key] = torch.randn(out.shape, generator=torch.Generator().manual_seed(2)).to(out.device)
    return _PROBES[key]


def _runner(fn, inp, train: bool, opt=None):
    import torch

    if not train:
        def run():
            with torch.no_grad():
                return fn(**inp)
        return run

    def step():
        out = first_tensor(fn(**inp))
        loss = (out.float() * _probe(out)).mean()
        loss.backward()
        if opt is not None:
            opt.step()
            opt.zero_grad(set_to_none=True)
        return loss
    return step


def _settle_mend(fn, inp, train, model, res, want, want_grads) -> None:
    """Half-precision matrix products start on cuBLAS while mend's fused kernels compile in the background:
    wait for those (``mend_tuning_wait_s``), then one call switches to the fastest, whose difference from
    eager counts too (the larger of the two is the row's)."""
    import mend.compiler

    t0 = time.perf_counter()
    mend.compiler.wait()
    res["mend_tuning_wait_s"] = time.perf_counter() - t0
    got = _runner(fn, inp, train)()
    if train:
        res["mend_grad_rel_diff"] = max(res["mend_grad_rel_diff"], _grad_diff(_grads(model), want_grads))
        model.zero_grad(set_to_none=True)
    else:
        res["mend_diff"] = max(res["mend_diff"], _diff(got, want)[0])


def _diff(got, want) -> tuple[float, float]:
    g, w = first_tensor(got), first_tensor(want)
    if g is None or w is None or g.shape != w.shape:
        return float("inf"), 0.0
    d = (g.double() - w.double()).abs().max().item() if w.numel() else 0.0
    return d, (w.double().abs().max().item() if w.numel() else 0.0)


def _grads(model) -> list:
    """Every parameter's gradient (zeros where none: a compiled graph may give zeros where eager gives
    None, for parameters the loss does not reach)."""
    import torch

    return [p.grad.detach().clone() if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]


def _grad_diff(got: list, want: list) -> float:
    """Relative L2 difference of all gradients together."""
    if len(got) != len(want) or not want:
        return float("inf")
    num = sum(float((a.double() - b.double()).pow(2).sum()) for a, b in zip(got, want))
    den = sum(float(b.double().pow(2).sum()) for b in want)
    return math.sqrt(num / max(den, 1e-300))


def _timed(runners: dict, device: str, rounds: int, reps: int) -> tuple[dict, dict]:
    """Median of per-round medians (ms) of each runner, rounds interleaved, and the round medians."""
    for r in runners.values():  # warm-up (CUDA graphs capture here)
        for _ in range(3):
            r()
    per = {k: [] for k in runners}
    for _ in range(rounds):
        for k, r in runners.items():
            ts = []
            for _ in range(reps):
                _sync(device)
                t0 = time.perf_counter()
                r()
                _sync(device)
                ts.append(time.perf_counter() - t0)
            per[k].append(statistics.median(ts) * 1e3)
    return {k: statistics.median(v) for k, v in per.items()}, per


def _profile(run, device: str, calls: int = 3, top: int = 15) -> dict:
    """The GPU kernels of ``calls`` warm calls: ``top``, the ``top`` longest by total device time [(name,
    microseconds per call, launches per call)] (what to look at where one compiler trails the other), and
    ``split``, microseconds per call of every kernel by :func:`_kernel_kind`."""
    from torch.profiler import ProfilerActivity, profile

    if device != "cuda":
        return {"top": [], "split": {}}
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            run()
        _sync(device)
    rows, split = [], dict.fromkeys(KERNEL_KINDS, 0.0)
    for e in prof.key_averages():
        t = getattr(e, "device_time_total", None)
        if t is None:
            t = getattr(e, "cuda_time_total", 0)
        if t > 0 and getattr(e, "device_type", None) is not None and "cpu" in str(e.device_type).lower():
            continue  # a host-side entry that reports its kernels' time again
        if t > 0:
            rows.append((e.key[:100], round(t / calls, 1), e.count // calls))
            split[_kernel_kind(e.key)] += t / calls
    return {"top": sorted(rows, key=lambda r: -r[1])[:top], "split": {k: round(v, 1) for k, v in split.items()}}


KERNEL_KINDS = ("library", "matmul", "generated", "aten", "memory")


def _kernel_kind(name: str) -> str:
    """``matmul``: a compiler's own matrix-product kernels (mend's ``mend_mat_*`` templates, Inductor's
    ``triton_tem_*``); ``generated``: its other kernels (``triton_*``, ``mend_*``); ``memory``: copies and
    fills; ``aten``: ATen's own kernels (what a compiler left to eager); ``library``: the rest, cuBLAS, cuDNN,
    CUTLASS and attention kernels, which both compilers call alike."""
    if name.startswith(("mend_mat_", "triton_tem_")):
        return "matmul"
    if name.startswith(("triton_", "mend_", "triton__")):
        return "generated"
    if name.startswith(("Memset", "Memcpy", "[memory]")) or "memcpy" in name.lower():
        return "memory"
    if "at::native::" in name or name.startswith("void at::"):
        return "aten"
    return "library"


def _gpu_lines(results: dict) -> list[str]:
    """Where the GPU time of a warm call goes (rows run with ``--profile``): each compiler's kernels by kind,
    and the floor of mend's runtime ratio its matrix products set (mend's library and matmul-template time
    over Inductor's whole GPU time: the ratio mend would reach with its other kernels, ATen calls and copies
    free, and no host time)."""
    rows = {m: r["profile"] for m, r in results.items() if isinstance(r.get("profile", {}).get("mend"), dict)
            and isinstance(r["profile"].get("inductor"), dict)}
    older = [m for m, p in rows.items() if not _split_complete(p)]
    rows = {m: p for m, p in rows.items() if m not in older}
    note = ([f"(not shown: {', '.join(older)}, profiled before matrix-product templates were counted apart from "
             "the other generated kernels)"] if older else [])
    if not rows:
        return [""] + note if note else []
    head = (f"{'model':<16}{'ind lib us':>11}{'ind mm':>8}{'ind gen':>9}{'ind aten':>9}{'ind mem':>8}{'mend lib':>10}"
            f"{'mend mm':>9}{'mend gen':>10}{'mend aten':>10}{'mend mem':>9}{'gen m/i':>8}{'gpu m/i':>8}{'floor':>7}")
    lines = ["", "GPU time per warm call, microseconds, by kind of kernel (--profile)", head, "-" * len(head)]
    cols = {"gen": [], "gpu": [], "floor": []}
    for m, p in rows.items():
        i = dict.fromkeys(KERNEL_KINDS, 0.0) | p["inductor"]["split"]
        k = dict.fromkeys(KERNEL_KINDS, 0.0) | p["mend"]["split"]
        ind_total, mend_total = sum(i.values()), sum(k.values())
        gen = k["generated"] / i["generated"] if i["generated"] else math.nan
        gpu, floor = mend_total / ind_total, (k["library"] + k["matmul"]) / ind_total
        for key, v in (("gen", gen), ("gpu", gpu), ("floor", floor)):
            cols[key].append(v)
        lines.append(f"{m:<16}{i['library']:>11.0f}{i['matmul']:>8.0f}{i['generated']:>9.0f}{i['aten']:>9.0f}"
                     f"{i['memory']:>8.0f}{k['library']:>10.0f}{k['matmul']:>9.0f}{k['generated']:>10.0f}"
                     f"{k['aten']:>10.0f}{k['memory']:>9.0f}"
                     f"{gen:>7.2f}x{gpu:>7.3f}x{floor:>6.3f}x")
    lines.append("-" * len(head))
    lines.append(f"geomean: mend's generated kernels {_geo(cols['gen']):.2f}x Inductor's; GPU time {_geo(cols['gpu']):.3f}x; "
                 f"floor set by mend's matrix products {_geo(cols['floor']):.3f}x (its runtime ratio with its other "
                 "kernels, ATen calls, copies and host time free)")
    return lines + note


def _split_complete(p: dict) -> bool:
    """The split counts matrix-product templates apart, or (raw results written before it did) none is
    among the longest kernels of either compiler."""
    return all("matmul" in p[c]["split"] or not any(_kernel_kind(n) == "matmul" for n, _, _ in p[c]["top"])
               for c in ("inductor", "mend"))


def _tuning_records() -> list:
    """mend's tuning records in this process's cache: each autotuned kernel, the configuration chosen and
    every candidate's time (ms; ``cublas+epilogue`` is cuBLAS's product and the epilogue kernel)."""
    root = Path(os.environ["MEND_CACHE_DIR"]) / "v1" / "triton" / "tune"
    out = []
    for f in sorted(root.glob("*/*.json")) if root.is_dir() else []:
        with contextlib.suppress(OSError, ValueError):
            out.append(json.loads(f.read_text()))
    return out


def measure(row: str, device: str, dtype_name: str, size_name: str, compilers: tuple, lock: str | None,
            rounds: int = 5, reps: int = 5, profile: bool = False, extras: tuple = ("cudagraphs", "async")) -> dict:
    """One row of the zoo, in this process (see the module docstring for the order of things)."""
    import torch

    import mend.compiler
    from mend.compiler import backend as mend_backend
    from mend.compiler.runtime import guard

    name, size, train, lm = parse_row(row, SIZES[size_name])
    dtype = getattr(torch, DTYPES[dtype_name])
    _set_cache_limits()
    model, inp = build(name, size, device, dtype, lm=lm)
    if train:
        model.train()
    gpu = GpuLock(lock)
    res: dict = {"model": row if lm or "@" in row else name, "kind": KINDS[name], "train": train, "dtype": dtype_name,
                 "attention": getattr(model.config, "_attn_implementation", "?")}
    stats0 = dict(mend_backend.STATS)
    rf0 = guard.STATS["runtime_fallbacks"]
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=device == "cuda") if train else None
    with gpu.held():  # the warm-up too: it starts compile workers, which would slow another model's compile
        _warm_up(device, compilers)
        ref_run = _runner(model, inp, train)
        want = ref_run()
        if train:
            want_grads = _grads(model)
            model.zero_grad(set_to_none=True)
        compiled = {}
        for c in compilers:
            _fresh_caches(c)
            fn = torch.compile(model, backend=c)
            run = _runner(fn, inp, train)
            _collected(device)
            t0 = time.perf_counter()
            try:
                got = run()
            except Exception as exc:  # noqa: BLE001 - a compiler that fails on this model is reported, not fatal
                res[f"{c}_error"] = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ''}"
                model.zero_grad(set_to_none=True)
                continue
            _sync(device)
            res[f"{c}_cold_s"] = time.perf_counter() - t0
            if train:
                res[f"{c}_grad_rel_diff"] = _grad_diff(_grads(model), want_grads)
                model.zero_grad(set_to_none=True)
                res[f"{c}_diff"], res["scale"] = abs(got.item() - want.item()), abs(want.item())
            else:
                res[f"{c}_diff"], res["scale"] = _diff(got, want)
            compiled[c] = fn
        if "mend" in compiled:
            _settle_mend(compiled["mend"], inp, train, model, res, want, want_grads if train else None)
        st = {k: mend_backend.STATS[k] - stats0[k] for k in ("graphs", "fallback_graphs", "kernels",
                                                               "interpreted_kernels", "extern_calls")}
        res.update({f"mend_{k}": v for k, v in st.items()})
        runners = {"eager": _runner(model, inp, train, opt)}
        runners.update({c: _runner(fn, inp, train, opt) for c, fn in compiled.items()})
        if device == "cuda" and "cudagraphs" in extras:
            runners.update({f"{c}-cg": _runner(torch.compile(model, backend=c, mode="reduce-overhead"), inp, train, opt)
                            for c in compiled})
        res["ms"], res["rounds_ms"] = _timed(runners, device, rounds, reps)
        if profile:
            res["profile"] = {c: _profile(runners[c], device) for c in compiled}
        if "mend" in compiled:
            res["mend_tuning"] = _tuning_records()
        if "mend" in compiled and not train and "async" in extras:
            _fresh_caches("async")
            fn = torch.compile(model, backend="mend", options={"async_compile": True})
            _collected(device)
            t0 = time.perf_counter()
            _runner(fn, inp, False)()
            _sync(device)
            res["mend_async_first_s"] = time.perf_counter() - t0
            mend.compiler.wait()
    res["mend_runtime_fallbacks"] = guard.STATS["runtime_fallbacks"] - rf0
    return res


# --------------------------------------------------------------------------------------- driving


def run_row(row: str, a, lock: str, timeout: float) -> dict:
    code = (f"import json, sys; sys.path.insert(0, {str(HERE.parent)!r}); import compiler_gpu_zoo as z; "
            f"print('RESULT ' + json.dumps(z.measure({row!r}, {a.device!r}, {a.dtype!r}, {a.size!r}, "
            f"{tuple(a.compilers.split(','))!r}, {lock!r}, {a.rounds}, {a.reps}, {a.profile}, {a.extras!r})))")
    tmp = tempfile.mkdtemp(prefix="mend_zoo_proc_")
    env = dict(os.environ, TRANSFORMERS_VERBOSITY="error", PYTHONWARNINGS="ignore",
               TORCHINDUCTOR_CACHE_DIR=os.path.join(tmp, "inductor"), TRITON_CACHE_DIR=os.path.join(tmp, "triton"),
               MEND_CACHE_DIR=os.path.join(tmp, "mend"))
    t0 = time.perf_counter()
    try:
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, env=env)
    except subprocess.TimeoutExpired:
        return {"error": f"timeout after {timeout:.0f} s"}
    for line in p.stdout.splitlines():
        if line.startswith("RESULT "):
            r = json.loads(line[7:])
            r["wall_s"] = time.perf_counter() - t0
            r["log_tail"] = [ln for ln in p.stderr.splitlines() if "mend" in ln][-8:]
            return r
    tail = [ln for ln in p.stderr.strip().splitlines() if ln.strip()][-6:] or ["no output"]
    return {"error": tail[-1][:300], "log_tail": tail}


def verdict(r: dict) -> str:
    """``ok``: mend within the tolerance Inductor meets (twice Inductor's difference from eager, or a floor:
    1e-5 of the output's scale in fp32, 1e-2 in half precision; a training row compares gradients,
    as one relative L2 difference: 1e-4 and 2e-2) and nothing fell back; ``FALLBACK``; ``DIFF``; ``error``."""
    if "error" in r:
        return "error"
    half = r["dtype"] != "fp32"
    if r["train"]:
        key, floor = "grad_rel_diff", 2e-2 if half else 1e-4
    else:
        key, floor = "diff", (1e-2 if half else 1e-5) * max(1.0, r.get("scale", 0.0))
    mine, theirs = r.get(f"mend_{key}"), r.get(f"inductor_{key}")
    tol = max(2 * theirs, floor) if theirs is not None else floor
    if r.get("mend_error"):
        return "error"
    if mine is None or not mine <= tol:
        return "DIFF"
    if r.get("mend_fallback_graphs") or r.get("mend_interpreted_kernels") or r.get("mend_runtime_fallbacks"):
        return "FALLBACK"
    return "ok"


def runtime_ratio(r: dict) -> tuple[float, str]:
    """mend / Inductor warm time: the median of the per-round ratios (rounds interleaved in one process) and
    its 95% bootstrap interval with a mark, ``+`` faster, ``-`` slower, ``=`` within noise
    (``mend.bench.stats.compare``); raw results without round medians give the ratio of the medians."""
    ms, rounds = r["ms"], r.get("rounds_ms") or {}
    if "inductor" not in ms or "mend" not in ms:
        return math.nan, ""
    if "inductor" not in rounds or "mend" not in rounds:
        return ms["mend"] / ms["inductor"], ""
    from mend.bench import stats

    c = stats.compare(rounds["inductor"], rounds["mend"])
    mark = {"faster": "+", "slower": "-"}.get(c["verdict"], "=")
    return c["ratio"], f"{c['interval'][0]:.2f}-{c['interval'][1]:.2f} {mark}"


def _geo(xs) -> float:
    xs = [x for x in xs if x and x > 0 and math.isfinite(x)]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def table(results: dict, a) -> str:
    lines = [f"compiler zoo: device {a.device}, dtype {a.dtype}, size {a.size}, compilers {a.compilers}"]
    head = (f"{'model':<20}{'kind':<9}{'attn':<7}{'verdict':>9}{'mend diff':>11}{'ind diff':>10}{'eager ms':>10}"
            f"{'ind ms':>9}{'mend ms':>9}{'m/i':>7}{'95% interval':>14}{'ind-cg':>9}{'mend-cg':>9}{'cg m/i':>8}"
            f"{'ind cold':>10}{'mend cold':>10}{'i/m cold':>9}{'async 1st':>10}{'i/async':>8}  graphs")
    lines += [head, "-" * len(head)]
    cols = {"rt": [], "cg": [], "cold": [], "async": []}
    for row, r in results.items():
        if "error" in r or "skipped" in r:
            lines.append(f"{row:<20}{'':<16}{'skipped' if 'skipped' in r else 'error':>9}  "
                         f"{r.get('skipped') or r.get('error')}")
            continue
        ms = r["ms"]
        rt, interval = runtime_ratio(r)
        cg = ms.get("mend-cg", math.nan) / ms.get("inductor-cg", math.nan) if "inductor-cg" in ms else math.nan
        cold = r.get("inductor_cold_s", math.nan) / r.get("mend_cold_s", math.nan)
        asy = r.get("inductor_cold_s", math.nan) / r.get("mend_async_first_s", math.nan)
        for k, v in (("rt", rt), ("cg", cg), ("cold", cold), ("async", asy)):
            cols[k].append(v)
        dk = "grad_rel_diff" if r["train"] else "diff"
        lines.append(
            f"{row:<20}{r['kind']:<9}{str(r.get('attention', '?'))[:6]:<7}{verdict(r):>9}{r.get('mend_' + dk, math.nan):>11.2e}"
            f"{r.get('inductor_' + dk, math.nan):>10.2e}{ms['eager']:>10.2f}{ms.get('inductor', math.nan):>9.2f}"
            f"{ms.get('mend', math.nan):>9.2f}{rt:>6.2f}x{interval:>14}{ms.get('inductor-cg', math.nan):>9.2f}"
            f"{ms.get('mend-cg', math.nan):>9.2f}{cg:>7.2f}x{r.get('inductor_cold_s', math.nan):>10.2f}"
            f"{r.get('mend_cold_s', math.nan):>10.2f}{cold:>8.1f}x{r.get('mend_async_first_s', math.nan):>10.2f}"
            f"{asy:>7.1f}x  {r.get('mend_graphs', 0)}g/{r.get('mend_kernels', 0)}k/{r.get('mend_extern_calls', 0)}a"
            + (f" eager:{r['mend_fallback_graphs']}" if r.get("mend_fallback_graphs") else "")
            + "".join(f" [{c} failed: {r[c + '_error']}]" for c in ("inductor", "mend") if r.get(c + "_error"))
            + (f" runtime:{r['mend_runtime_fallbacks']}" if r.get("mend_runtime_fallbacks") else ""))
    lines.append("-" * len(head))
    worst = max((x for x in cols["rt"] if math.isfinite(x)), default=math.nan)
    lines.append(f"geomean mend/inductor runtime {_geo(cols['rt']):.3f}x (target <= 0.95; slowest cell {worst:.2f}x, "
                 f"target <= 1.10; 95% intervals from the paired rounds: + faster, - slower, = within noise); with CUDA graphs "
                 f"{_geo(cols['cg']):.3f}x (target <= 1.0); cold compile inductor/mend {_geo(cols['cold']):.2f}x "
                 f"(target >= 3); first result with async_compile {_geo(cols['async']):.2f}x (target >= 6)")
    ok = sum(verdict(r) == "ok" for r in results.values() if "skipped" not in r)
    ran = sum("skipped" not in r for r in results.values())
    lines.append(f"{ok}/{ran} rows ok (mend within the tolerance Inductor meets, nothing fell back); "
                 f"{len(results) - ran} skipped")
    return "\n".join(lines + _gpu_lines(results))


def sized(row: str, size: str) -> str:
    """``bert:train`` and ``8x512`` -> ``bert@8x512:train``."""
    head, sep, tail = row.partition(":")
    return f"{head.split('@')[0]}@{size}{sep}{tail}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    ap.add_argument("--dtype", default="bf16", choices=sorted(DTYPES))
    ap.add_argument("--size", default=None, choices=sorted(SIZES), help="default: real on cuda, tiny on cpu")
    ap.add_argument("--models", default=None, help=f"comma-separated rows, or 'inference', 'training' or 'lm' "
                                                   f"(default: all, {','.join(MODELS)})")
    ap.add_argument("--compilers", default="inductor,mend")
    ap.add_argument("--jobs", type=int, default=2, help="model processes at once (timed regions never overlap)")
    ap.add_argument("--budget-s", type=float, default=None, help="start no model after this many seconds")
    ap.add_argument("--deadline-s", type=float, default=None, help="stop every model process after this many seconds")
    ap.add_argument("--timeout", type=int, default=300, help="seconds per model process")
    ap.add_argument("--profile", action="store_true", help="the longest GPU kernels of each compiler, in the json")
    ap.add_argument("--sizes", default=None, help="comma-separated AxB (batch x tokens, images x side, batch x "
                                                  "frames): one row per model and size (the size sweep)")
    ap.add_argument("--no-cudagraphs", action="store_true", help="leave out the CUDA-graph runs (a sweep fits more)")
    ap.add_argument("--no-async", action="store_true", help="leave out mend's first result with async_compile")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--out", type=Path, default=None, help="folder for zoo_<dtype>.json and zoo_<dtype>.txt")
    ap.add_argument("--show", default=None, help="comma-separated raw results (json) of runs in parts: print their "
                                                 "rows as one table (--dtype says theirs); run nothing")
    a = ap.parse_args(argv)
    a.size = a.size or ("real" if a.device == "cuda" else "tiny")
    a.extras = tuple(x for x, off in (("cudagraphs", a.no_cudagraphs), ("async", a.no_async)) if not off)
    if a.show:
        merged: dict = {}
        for path in a.show.split(","):
            merged.update(json.loads(Path(path).read_text()))
        print(table(merged, a))
        return 0
    groups = {"inference": list(INFERENCE), "training": list(TRAINING), "lm": list(LM)}
    rows = [r for m in (a.models or "inference,training,lm").split(",") for r in groups.get(m, [m])]
    if a.sizes:
        rows = [sized(r, s) for r in rows for s in a.sizes.split(",")]
    unknown = [r for r in rows if r.split(":")[0].split("@")[0] not in CONFIGS]
    if unknown:
        ap.error(f"unknown models {unknown}; choose from {', '.join(CONFIGS)}")
    lock = os.path.join(tempfile.mkdtemp(prefix="mend_zoo_lock_"), "gpu.lock")
    start = time.perf_counter()

    def one(row):
        now = time.perf_counter() - start
        if a.budget_s is not None and now > a.budget_s:
            return {"skipped": f"time budget of {a.budget_s:.0f} s spent"}
        timeout = a.timeout if a.deadline_s is None else max(1.0, min(a.timeout, a.deadline_s - now))
        r = run_row(row, a, lock, timeout)
        print(f"[{time.perf_counter() - start:6.0f} s] {row}: {verdict(r) if 'error' not in r else r['error']}",
              flush=True)
        return r

    with ThreadPoolExecutor(a.jobs) as ex:
        results = dict(zip(rows, ex.map(one, rows)))
    text = table(results, a)
    print(text)
    if a.out:
        a.out.mkdir(parents=True, exist_ok=True)
        (a.out / f"zoo_{a.dtype}.json").write_text(json.dumps(results, indent=1))
        (a.out / f"zoo_{a.dtype}.txt").write_text(text + "\n")
    ran = [r for r in results.values() if "skipped" not in r]
    return 0 if all(verdict(r) == "ok" for r in ran) else 1


if __name__ == "__main__":
    raise SystemExit(main())
