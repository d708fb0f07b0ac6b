"""Repair rate of ``mend fix`` on real models: graph breaks before and after, side by side.

For each model (transformers built from small configs with random weights, no downloads):

1. a worker process builds the model with the *installed* transformers, compiles it with mend's
   recorder attached (``mend.analyzers.runtime.record``, counting backend), runs one forward
   under ``torch.no_grad()`` and reports graphs, break sites and the output;
2. the same worker runs against a *repaired copy* of transformers (``cp -r site-packages/transformers
   DIR; mend fix DIR``, then ``PYTHONPATH=DIR``);
3. the table shows breaks before -> after, graphs, and whether the outputs match
   (``torch.allclose`` rtol=1.3e-6, atol=1e-5; "exact" when bitwise equal).

It also reports the runtime of ``mend fix`` over the whole transformers tree (and, with
``--torch-tree``, over torch's own Python sources), and checks that every output parses and that a
second run changes nothing.

    python benchmarks/repair_rate.py                 # safe fixes, default model set
    python benchmarks/repair_rate.py --unsafe-fixes  # also unsafe fixes
    python benchmarks/repair_rate.py --models longformer,bart --torch-tree
    python benchmarks/repair_rate.py --models all --both --model-folders-only   # the full survey
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SMALL = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64, vocab_size=100,
             max_position_embeddings=128)
# encoder-decoder models in the BART family
S2S = dict(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
           encoder_ffn_dim=64, decoder_ffn_dim=64)
T5S = dict(d_model=32, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=2, d_kv=16)


def _m(cfg: str, model: str, inputs: str = "ids", **extra: object) -> tuple[str, str, dict, str]:
    return (cfg, model, extra, inputs)


# name: (config class, model class, extra config kwargs, inputs); inputs is "ids" (input_ids 2 x 16),
# "s2s" (plus decoder_input_ids 2 x 8), "labels" (plus labels 2 x 8), "pixels" (pixel_values 1 x 3 x 64 x 64) or "features" (Whisper-style
# input_features). A None value removes a SMALL key.
MODELS = {
    # sequence length 14 with attention window 4: Longformer pads the input (and logs that it did)
    "longformer": _m("LongformerConfig", "LongformerModel", attention_window=[4, 4]),
    "led": _m("LEDConfig", "LEDModel", "s2s", **{**S2S, "encoder_layers": 2}, attention_window=[4, 4], max_encoder_position_embeddings=128,
              max_decoder_position_embeddings=128),
    "bart": _m("BartConfig", "BartModel", "s2s", **S2S),
    "bert": _m("BertConfig", "BertModel"),
    "gpt2": _m("GPT2Config", "GPT2Model", n_embd=32, n_layer=2, n_head=2, n_positions=128),
    "t5": _m("T5Config", "T5Model", "s2s", **T5S),
    # block-sparse attention on a short sequence: BigBird logs a warning and falls back to full attention
    "big_bird": _m("BigBirdConfig", "BigBirdModel", attention_type="block_sparse"),
    "bigbird_pegasus": _m("BigBirdPegasusConfig", "BigBirdPegasusModel", "s2s", **S2S, attention_type="block_sparse"),
    "funnel": _m("FunnelConfig", "FunnelModel", num_hidden_layers=None, d_model=32, n_head=2, d_head=16, d_inner=64, block_sizes=[1, 1]),
    "deberta": _m("DebertaConfig", "DebertaModel"),
    "deberta_v2": _m("DebertaV2Config", "DebertaV2Model"),
    "xlnet": _m("XLNetConfig", "XLNetModel", d_model=32, n_layer=2, n_head=2, d_inner=64, max_position_embeddings=None),
    "reformer": _m("ReformerConfig", "ReformerModel", attention_head_size=16, feed_forward_size=64,
                   axial_pos_embds=False, attn_layers=["local", "local"], local_attn_chunk_length=8),
    "xlm": _m("XLMConfig", "XLMModel", emb_dim=32, n_layers=2, n_heads=2),
    "flaubert": _m("FlaubertConfig", "FlaubertModel", emb_dim=32, n_layers=2, n_heads=2),
    # LSH attention with axial position embeddings (the `.item()` on position ids)
    "reformer_lsh": _m("ReformerConfig", "ReformerModel", attention_head_size=16, feed_forward_size=64,
                       attn_layers=["local", "lsh"], axial_pos_shape=[4, 4], axial_pos_embds_dim=[16, 16],
                       max_position_embeddings=16, lsh_attn_chunk_length=8, local_attn_chunk_length=8,
                       num_buckets=2, is_decoder=False),
    "mpnet": _m("MPNetConfig", "MPNetModel"),
    "fsmt": _m("FSMTConfig", "FSMTModel", "s2s", **S2S, src_vocab_size=100, tgt_vocab_size=100, langs=["en", "de"]),
    "prophetnet": _m("ProphetNetConfig", "ProphetNetModel", "s2s", num_hidden_layers=None, hidden_size=32, encoder_ffn_dim=64,
                     decoder_ffn_dim=64, num_encoder_layers=1, num_decoder_layers=1, num_encoder_attention_heads=2,
                     num_decoder_attention_heads=2, ngram=2, num_buckets=8, relative_max_distance=16),
    # with labels and no decoder inputs, the model shifts the labels right and asserts on `.item()`
    "prophetnet_lm": _m("ProphetNetConfig", "ProphetNetForConditionalGeneration", "labels", num_hidden_layers=None,
                        hidden_size=32, encoder_ffn_dim=64, decoder_ffn_dim=64, num_encoder_layers=1,
                        num_decoder_layers=1, num_encoder_attention_heads=2, num_decoder_attention_heads=2,
                        ngram=2, num_buckets=8, relative_max_distance=16),
    "switch_transformers": _m("SwitchTransformersConfig", "SwitchTransformersModel", "s2s", **T5S, num_experts=4,
                              expert_capacity=8, num_sparse_encoder_layers=1, num_sparse_decoder_layers=1,
                              decoder_start_token_id=0),
    "nllb_moe": _m("NllbMoeConfig", "NllbMoeModel", "s2s", **S2S, num_experts=4, expert_capacity=8,
                   encoder_sparse_step=1, decoder_sparse_step=1),
    "m2m_100": _m("M2M100Config", "M2M100Model", "s2s", **S2S),
    "marian": _m("MarianConfig", "MarianModel", "s2s", **S2S, decoder_vocab_size=100, pad_token_id=1),
    "pegasus_x": _m("PegasusXConfig", "PegasusXModel", "s2s", **S2S, block_size=8, num_global_tokens=4),
    "esm": _m("EsmConfig", "EsmModel", pad_token_id=1, mask_token_id=2),
    "luke": _m("LukeConfig", "LukeModel", entity_vocab_size=20, entity_emb_size=16),
    "canine": _m("CanineConfig", "CanineModel", downsampling_rate=2, num_hash_buckets=64, vocab_size=None),
    "squeezebert": _m("SqueezeBertConfig", "SqueezeBertModel", embedding_size=32),
    "mra": _m("MraConfig", "MraModel", block_per_row=2, approx_mode="full"),
    "yoso": _m("YosoConfig", "YosoModel", use_expectation=True),
    "nystromformer": _m("NystromformerConfig", "NystromformerModel", num_landmarks=4, segment_means_seq_len=16),
    "ctrl": _m("CTRLConfig", "CTRLModel", n_embd=32, n_layer=2, n_head=2, dff=64, n_positions=128),
    "tapas": _m("TapasConfig", "TapasModel"),
    "longt5": _m("LongT5Config", "LongT5Model", "s2s", **T5S, encoder_attention_type="transient-global",
                 local_radius=4, global_block_size=4),
    "electra": _m("ElectraConfig", "ElectraModel", embedding_size=32),
    "roformer": _m("RoFormerConfig", "RoFormerModel", embedding_size=32),
    "xglm": _m("XGLMConfig", "XGLMModel", d_model=32, num_layers=2, attention_heads=2, ffn_dim=64),
    "opt": _m("OPTConfig", "OPTModel", ffn_dim=64, word_embed_proj_dim=32),
    "bloom": _m("BloomConfig", "BloomModel", n_layer=2, n_head=2),
    "mixtral": _m("MixtralConfig", "MixtralModel", num_key_value_heads=1, num_local_experts=4, num_experts_per_tok=2),
    "qwen2_moe": _m("Qwen2MoeConfig", "Qwen2MoeModel", num_key_value_heads=1, num_experts=4, num_experts_per_tok=2,
                    moe_intermediate_size=32, shared_expert_intermediate_size=32),
    "rwkv": _m("RwkvConfig", "RwkvModel", context_length=128, attention_hidden_size=32),
    "mamba": _m("MambaConfig", "MambaModel", state_size=4),
    "umt5": _m("UMT5Config", "UMT5Model", "s2s", **T5S),
    "plbart": _m("PLBartConfig", "PLBartModel", "s2s", **S2S),
    "whisper": _m("WhisperConfig", "WhisperModel", "features", **S2S, num_mel_bins=8, max_source_positions=16,
                  pad_token_id=1, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
                  max_target_positions=32),
    "detr": _m("DetrConfig", "DetrModel", "pixels", d_model=32, encoder_layers=1, decoder_layers=1,
               encoder_attention_heads=2, decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64,
               num_queries=8, use_timm_backbone=False, use_pretrained_backbone=False,
               backbone_config={"model_type": "resnet", "embedding_size": 8, "hidden_sizes": [8, 16, 16, 32],
                                "depths": [1, 1, 1, 1], "out_features": ["stage4"]}),
}
FOLDERS = {"reformer_lsh": "reformer", "prophetnet_lm": "prophetnet"}  # survey name -> folder under transformers/models, where they differ
DEFAULT = "xlm,flaubert,prophetnet_lm,longformer,led,big_bird,bart,bert,gpt2,t5"


def _inputs(name: str, kind: str, cfg: object) -> dict:
    import torch

    g = torch.Generator().manual_seed(1)
    if kind == "pixels":
        return {"pixel_values": torch.randn(1, 3, 64, 64, generator=g)}
    if kind == "features":
        n = 2 * cfg.max_source_positions  # type: ignore[attr-defined]
        return {"input_features": torch.randn(1, cfg.num_mel_bins, n, generator=g),  # type: ignore[attr-defined]
                "decoder_input_ids": torch.randint(3, 100, (1, 8), generator=g)}
    seq = 14 if name in {"longformer", "led"} else 16
    ids = torch.randint(3, 100, (2, seq), generator=g)
    inputs = {"input_ids": ids}
    if kind == "s2s":
        inputs["decoder_input_ids"] = ids[:, :8]
    if kind == "labels":
        inputs["labels"] = ids[:, :8]
    return inputs


def _first(o: object) -> object:
    import torch

    if isinstance(o, torch.Tensor):
        return o
    if isinstance(o, (tuple, list)):
        return _first(o[0])
    return _first(o.to_tuple()[0])  # type: ignore[attr-defined]


def measure(name: str, out: str) -> None:
    """Build one model, run it eagerly and compiled (recorder, backend="eager"), write JSON and .pt."""
    import torch
    import transformers

    from mend.analyzers.runtime import record

    cfg_cls, model_cls, extra, kind = MODELS[name]
    torch.manual_seed(0)
    kwargs = dict(SMALL)
    kwargs.update(extra)
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    cfg = getattr(transformers, cfg_cls)(**kwargs)
    model = getattr(transformers, model_cls)(cfg).eval()
    inputs = _inputs(name, kind, cfg)
    src = str(Path(transformers.__file__).parent)
    torch._dynamo.reset()
    with torch.no_grad():
        eager = model(**inputs)
        with record(source=[src], fast=True) as rec:
            compiled = torch.compile(model, backend="eager")(**inputs)
    torch.save({"eager": _first(eager), "compiled": _first(compiled)}, out + ".pt")
    Path(out).write_text(json.dumps({
        "transformers": src,
        "graphs": rec.graphs,
        "breaks": [f"{Path(b.path).name}:{b.line} {b.registry_id or ''} {b.gb_type}" for b in rec.breaks],
        "recompiles": len(getattr(rec, "recompiles", []) or []),
        "occurrences": sum(b.count for b in rec.breaks),
    }))


def worker(names: str, outdir: str, tag: str) -> None:
    """Measure several models in one process (one import of torch and transformers); one error per model."""
    import traceback
    import warnings

    # transformers keeps its default log level (warning): a model that logs in forward breaks the graph
    # there, as it does for a user; warnings.warn is silenced (Dynamo breaks on it either way)
    warnings.filterwarnings("ignore")
    for name in names.split(","):
        out = str(Path(outdir) / f"{name}-{tag}.json")
        try:
            measure(name, out)
        except Exception as e:  # noqa: BLE001  (the table shows the error of that model)
            line = traceback.format_exception_only(type(e), e)[-1].strip()
            Path(out).write_text(json.dumps({"error": line[:300]}))


def run_worker(names: list[str], pythonpath: str | None, tmp: Path, tag: str) -> dict[str, dict]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, __file__, "--worker", ",".join(names), str(tmp), tag], env=env,
                          capture_output=True, text=True, timeout=3600)
    res = {}
    for name in names:
        out = tmp / f"{name}-{tag}.json"
        if not out.exists():
            err = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"
            res[name] = {"error": err}
            continue
        data = json.loads(out.read_text())
        data["pt"] = str(out) + ".pt"
        res[name] = data
    return res


def mend_fix(tree: Path, unsafe: bool) -> tuple[float, str]:
    cmd = [sys.executable, "-m", "mend.cli", "fix", "-q", str(tree)] + (["--unsafe-fixes"] if unsafe else [])
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return time.perf_counter() - t0, (proc.stdout.strip().splitlines() or [""])[-1]


def check_tree(tree: Path) -> int:
    import ast

    bad = 0
    for p in tree.rglob("*.py"):
        try:
            ast.parse(p.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            bad += 1
    return bad


def snapshot(tree: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in tree.rglob("*.py")}


def _verdict(torch: object, before: dict, after: dict) -> str:
    pa, pb = torch.load(before["pt"]), torch.load(after["pt"])  # type: ignore[attr-defined]
    if torch.equal(pa["eager"], pb["compiled"]):  # type: ignore[attr-defined]
        return "exact"
    return "close" if torch.allclose(pa["eager"], pb["compiled"], rtol=1.3e-6, atol=1e-5) else "DIFFER"  # type: ignore


def _repair(tmp: Path, src: Path, tag: str, names: list[str], unsafe: bool, folders_only: bool) -> Path:
    copy = tmp / tag
    copy.mkdir()
    tree = copy / "transformers"
    shutil.copytree(src, tree, ignore=shutil.ignore_patterns("__pycache__"))
    files = sum(1 for _ in tree.rglob("*.py"))
    if folders_only:
        t0 = time.perf_counter()
        for name in names:
            mend_fix(tree / "models" / FOLDERS.get(name, name), unsafe)
        print(f"[{tag}] mend fix over the {len(names)} model folders only: {time.perf_counter() - t0:.1f} s")
        return copy
    before_tree = snapshot(tree)
    secs, summary = mend_fix(tree, unsafe)
    after_tree = snapshot(tree)
    changed = sum(before_tree[k] != after_tree[k] for k in before_tree)
    unparsable = check_tree(tree)
    secs2, _ = mend_fix(tree, unsafe)
    stable = snapshot(tree) == after_tree
    print(f"[{tag}] mend fix over transformers ({files} files): {secs:.1f} s; {changed} files changed; "
          f"{unparsable} unparsable outputs; second run ({secs2:.1f} s) "
          f"{'changes nothing' if stable else 'CHANGED FILES'}")
    print(f"  {summary}")
    return copy


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=DEFAULT, help="comma-separated names, or 'all' (every model in MODELS)")
    ap.add_argument("--unsafe-fixes", action="store_true", help="repair with --unsafe-fixes (one repaired copy)")
    ap.add_argument("--both", action="store_true", help="two repaired copies, safe and unsafe: before -> safe -> unsafe")
    ap.add_argument("--torch-tree", action="store_true", help="also run mend fix over torch's sources")
    ap.add_argument("--model-folders-only", action="store_true",
                    help="repair only the models' own folders (fast), not the whole transformers tree")
    args = ap.parse_args()
    import torch  # noqa: F401  (only for comparing outputs in this process)
    import transformers

    names = list(MODELS) if args.models == "all" else [n.strip() for n in args.models.split(",") if n.strip()]
    bad = [n for n in names if n not in MODELS]
    if bad:
        raise SystemExit(f"unknown model {', '.join(bad)}; choose from {', '.join(MODELS)}")
    src = Path(transformers.__file__).parent
    variants = [("safe", False), ("unsafe", True)] if args.both else [
        ("unsafe" if args.unsafe_fixes else "safe", args.unsafe_fixes)]
    with tempfile.TemporaryDirectory(prefix="mend-repair-") as tmp_s:
        tmp = Path(tmp_s)
        copies = {tag: _repair(tmp, src, tag, names, unsafe, args.model_folders_only) for tag, unsafe in variants}
        if args.torch_tree:
            import torch as _t

            ttree = tmp / "torch"
            shutil.copytree(Path(_t.__file__).parent, ttree, ignore=shutil.ignore_patterns(
                "__pycache__", "*.so", "*.so.*", "lib", "include", "bin", "share"))
            tfiles = sum(1 for _ in ttree.rglob("*.py"))
            s1, summ = mend_fix(ttree, args.unsafe_fixes)
            snap = snapshot(ttree)
            s2, _ = mend_fix(ttree, args.unsafe_fixes)
            print(f"mend fix over torch {_t.__version__} sources ({tfiles} files): {s1:.1f} s; "
                  f"{check_tree(ttree)} unparsable; second run ({s2:.1f} s) "
                  f"{'changes nothing' if snapshot(ttree) == snap else 'CHANGED FILES'}")
            print(f"  {summ}")
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=2) as pool:  # one worker process per variant, two at a time
            jobs = {tag: pool.submit(run_worker, names, str(copy) if copy else None, tmp, tag)
                    for tag, copy in [("before", None), *copies.items()]}
            results = {tag: job.result() for tag, job in jobs.items()}
        before = results.pop("before")
        after = results
        print()
        tags = list(copies)
        print(f"transformers {transformers.__version__}, torch {torch.__version__}, backend=eager, no_grad; "
              f"breaks = distinct break sites; outputs: original eager vs repaired compiled")
        head = f"{'model':<20} {'breaks':>6} " + " ".join(f"{'-> ' + t:>9}" for t in tags) + \
            f" {'graphs':>12}  outputs  remaining breaks (last variant)"
        print(head)
        totals = [0] * (1 + len(tags))
        for name in names:
            a = before[name]
            if "error" in a:
                print(f"{name:<20} error: {a['error'][:150]}")
                continue
            rows = [after[t][name] for t in tags]
            err = next((r["error"] for r in rows if "error" in r), None)
            if err:
                print(f"{name:<20} error after repair: {err[:150]}")
                continue
            if not all(r["transformers"].startswith(str(copies[t])) for t, r in zip(tags, rows)):
                print(f"{name:<20} error: the repaired copy was not imported")
                continue
            counts = [len(a["breaks"])] + [len(r["breaks"]) for r in rows]
            totals = [x + y for x, y in zip(totals, counts)]
            graphs = " -> ".join(str(g) for g in [a["graphs"]] + [r["graphs"] for r in rows])
            verdicts = "/".join(_verdict(torch, a, r) for r in rows)
            print(f"{name:<20} {counts[0]:>6} " + " ".join(f"{c:>9}" for c in counts[1:]) +
                  f" {graphs:>12}  {verdicts:<7}  {'; '.join(rows[-1]['breaks'])[:160]}")
        if totals[0]:
            print("\ntotal break sites: " + " -> ".join(str(t) for t in totals) +
                  f" ({100 * (totals[0] - totals[-1]) / totals[0]:.0f}% removed)")


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        main()
