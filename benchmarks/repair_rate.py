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
MODELS = {
    # name: (config class, model class, extra config kwargs, needs decoder inputs)
    # sequence length 14 with attention window 4: Longformer pads the input (and logs that it did)
    "longformer": ("LongformerConfig", "LongformerModel", dict(attention_window=[4, 4]), False),
    "bart": ("BartConfig", "BartModel", dict(d_model=32, encoder_layers=1, decoder_layers=1,
                                              encoder_attention_heads=2, decoder_attention_heads=2,
                                              encoder_ffn_dim=64, decoder_ffn_dim=64), True),
    "bert": ("BertConfig", "BertModel", {}, False),
    "gpt2": ("GPT2Config", "GPT2Model", dict(n_embd=32, n_layer=2, n_head=2, n_positions=128), False),
    "t5": ("T5Config", "T5Model", dict(d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16), True),
    # block-sparse attention on a short sequence: BigBird logs a warning and falls back to full attention
    "big_bird": ("BigBirdConfig", "BigBirdModel", dict(attention_type="block_sparse"), False),
    "funnel": ("FunnelConfig", "FunnelModel", dict(d_model=32, n_head=2, d_head=16, d_inner=64,
                                                    block_sizes=[1, 1]), False),
    "deberta_v2": ("DebertaV2Config", "DebertaV2Model", {}, False),
    "xlnet": ("XLNetConfig", "XLNetModel", dict(d_model=32, n_layer=2, n_head=2, d_inner=64,
                                                 max_position_embeddings=None), False),
    "reformer": ("ReformerConfig", "ReformerModel", dict(attention_head_size=16, feed_forward_size=64,
                                                          axial_pos_embds=False, attn_layers=["local", "local"],
                                                          local_attn_chunk_length=8), False),
    "led": ("LEDConfig", "LEDModel", dict(d_model=32, encoder_layers=2, decoder_layers=1,
                                          encoder_attention_heads=2, decoder_attention_heads=2,
                                          encoder_ffn_dim=64, decoder_ffn_dim=64, attention_window=[4, 4],
                                          max_encoder_position_embeddings=128,
                                          max_decoder_position_embeddings=128), True),
    "mpnet": ("MPNetConfig", "MPNetModel", {}, False),
}
DEFAULT = "longformer,led,big_bird,bart,bert,gpt2,t5"


def worker(name: str, out: str) -> None:
    import torch
    import transformers

    from mend.analyzers.runtime import record

    cfg_cls, model_cls, extra, seq2seq = MODELS[name]
    torch.manual_seed(0)
    kwargs = dict(SMALL)
    kwargs.update(extra)
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    cfg = getattr(transformers, cfg_cls)(**kwargs)
    model = getattr(transformers, model_cls)(cfg).eval()
    kwargs = {k: v for k, v in kwargs.items() if v is not None}
    seq = 14 if name in {"longformer", "led"} else 16
    ids = torch.randint(3, 100, (2, seq), generator=torch.Generator().manual_seed(1))
    inputs = {"input_ids": ids}
    if seq2seq:
        inputs["decoder_input_ids"] = ids[:, :8]
    src = str(Path(transformers.__file__).parent)
    with torch.no_grad():
        eager = model(**inputs)
        torch._dynamo.reset()
        with record(source=[src], fast=True) as rec:
            compiled = torch.compile(model)(**inputs)
    first = lambda o: o[0] if isinstance(o, (tuple, list)) else o.to_tuple()[0]  # noqa: E731
    torch.save({"eager": first(eager), "compiled": first(compiled)}, out + ".pt")
    Path(out).write_text(json.dumps({
        "transformers": src,
        "graphs": rec.graphs if isinstance(rec.graphs, int) else len(rec.graphs),
        "breaks": [f"{Path(b.path).name}:{b.line} {b.registry_id or ''} {b.gb_type}" for b in rec.breaks],
        "occurrences": sum(b.count for b in rec.breaks),
    }))


def run_worker(name: str, pythonpath: str | None, tmp: Path, tag: str) -> dict:
    out = tmp / f"{name}-{tag}.json"
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, __file__, "--worker", name, str(out)], env=env,
                          capture_output=True, text=True, timeout=900)
    if proc.returncode != 0 or not out.exists():
        return {"error": proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"}
    data = json.loads(out.read_text())
    data["pt"] = str(out) + ".pt"
    return data


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


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=DEFAULT)
    ap.add_argument("--unsafe-fixes", action="store_true")
    ap.add_argument("--torch-tree", action="store_true", help="also run mend fix over torch's sources")
    ap.add_argument("--model-folders-only", action="store_true",
                    help="repair only the models' own folders (fast), not the whole transformers tree")
    args = ap.parse_args()
    import torch  # noqa: F401  (only for comparing outputs in this process)
    import transformers

    names = [n.strip() for n in args.models.split(",") if n.strip()]
    with tempfile.TemporaryDirectory(prefix="mend-repair-") as tmp_s:
        tmp = Path(tmp_s)
        copy = tmp / "site"
        copy.mkdir()
        tree = copy / "transformers"
        shutil.copytree(Path(transformers.__file__).parent, tree, ignore=shutil.ignore_patterns("__pycache__"))
        files = sum(1 for _ in tree.rglob("*.py"))
        if args.model_folders_only:
            t0 = time.perf_counter()
            for name in names:
                mend_fix(tree / "models" / name, args.unsafe_fixes)
            print(f"mend fix over the {len(names)} model folders only: {time.perf_counter() - t0:.1f} s")
        before_tree = snapshot(tree)
        if not args.model_folders_only:
            secs, summary = mend_fix(tree, args.unsafe_fixes)
            after_tree = snapshot(tree)
            changed = sum(before_tree[k] != after_tree[k] for k in before_tree)
            unparsable = check_tree(tree)
            secs2, _ = mend_fix(tree, args.unsafe_fixes)
            stable = snapshot(tree) == after_tree
            print(f"mend fix over transformers {transformers.__version__} ({files} files): {secs:.1f} s; "
                  f"{changed} files changed; {unparsable} unparsable outputs; second run ({secs2:.1f} s) "
                  f"{'changes nothing' if stable else 'CHANGED FILES'}")
            print(f"  {summary}")
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
        print()
        print(f"{'model':<12} {'breaks before':>13} {'after':>6} {'graphs':>10}  outputs   remaining breaks")
        total_b = total_a = 0
        for name in names:
            a = run_worker(name, None, tmp, "before")
            b = run_worker(name, str(copy), tmp, "after")
            if "error" in a or "error" in b:
                print(f"{name:<12} error: {a.get('error') or b.get('error')}")
                continue
            if not b["transformers"].startswith(str(copy)):
                print(f"{name:<12} error: the repaired copy was not imported")
                continue
            pa, pb = torch.load(a["pt"]), torch.load(b["pt"])
            exact = torch.equal(pa["eager"], pb["compiled"])
            close = exact or torch.allclose(pa["eager"], pb["compiled"], rtol=1.3e-6, atol=1e-5)
            verdict = "exact" if exact else ("close" if close else "DIFFER")
            nb, na = len(a["breaks"]), len(b["breaks"])
            total_b += nb
            total_a += na
            print(f"{name:<12} {nb:>13} {na:>6} {a['graphs']:>4} -> {b['graphs']:<3}  {verdict:<8}  "
                  f"{'; '.join(b['breaks'])[:110]}")
        if total_b:
            print(f"\ntotal break sites: {total_b} -> {total_a} ({100 * (total_b - total_a) / total_b:.0f}% removed)")


if __name__ == "__main__":
    if len(sys.argv) >= 2 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3])
    else:
        main()
