"""LayerDrop above 0 repaired by ``mend fix --unsafe-fixes``: compiled training steps against eager, with and without
dropout inside the layers.

For TimeSeriesTransformer and M2M100 (tiny configs, 4 + 4 layers, ``layerdrop=0.5``, training, loss and backward),
each source in its own process: the original, and the copy of the transformers package that ``mend fix
--unsafe-fixes`` repaired (``--fixed``: the folder holding that ``transformers``, e.g. a corpus run's
``--cache-dir``'s ``unsafe-*``). Each step is seeded alike and run eagerly on the original model, then compiled
(``backend="eager"``, so random numbers come from the same generator as eager's) on the source's model, which
holds the same weights; printed: the graphs Dynamo made over the steps, the largest difference of the loss and
of every gradient from the original's eager step, and how many parameter gradients are None in eager and zero
compiled (a dropped layer's). With dropout 0 the only randomness is LayerDrop's own draw.

    python benchmarks/layerdrop_select.py --fixed /tmp/cache/unsafe-8d45fc65072db43a
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

MODELS = ("time_series_transformer", "m2m_100")
STEPS = 4


def _build(transformers, torch, model: str, dropout: float):
    torch.manual_seed(0)
    common = dict(encoder_layers=4, decoder_layers=4, encoder_attention_heads=2, decoder_attention_heads=2,
                  encoder_ffn_dim=16, decoder_ffn_dim=16, encoder_layerdrop=0.5, decoder_layerdrop=0.5,
                  dropout=dropout, attention_dropout=dropout, activation_dropout=dropout)
    if model == "time_series_transformer":
        cfg = transformers.TimeSeriesTransformerConfig(prediction_length=4, context_length=8, lags_sequence=[1, 2],
                                                       d_model=16, num_time_features=1, **common)
        n = 8 + 2
        batch = dict(past_values=torch.randn(2, n), past_time_features=torch.randn(2, n, 1),
                     past_observed_mask=torch.ones(2, n), future_values=torch.randn(2, 4),
                     future_time_features=torch.randn(2, 4, 1))
        return transformers.TimeSeriesTransformerForPrediction(cfg).train(), batch
    cfg = transformers.M2M100Config(vocab_size=64, d_model=16, use_cache=False, max_position_embeddings=32, **common)
    batch = dict(input_ids=torch.randint(3, 64, (2, 8)), labels=torch.randint(3, 64, (2, 8)))
    return transformers.M2M100ForConditionalGeneration(cfg).train(), batch


def _step(module, params, batch, seed: int, torch):
    torch.manual_seed(seed)
    params.zero_grad(set_to_none=True)
    loss = module(**batch).loss
    loss.backward()
    return loss.detach(), {k: None if p.grad is None else p.grad.clone() for k, p in params.named_parameters()}


def worker(model: str, dropout: float, reference: str) -> dict:
    """One source (this process's ``transformers``): its compiled steps against the eager steps of ``reference``
    (a saved file of the original's losses and gradients), or, with no reference, the original's eager steps."""
    import torch
    import transformers
    from torch._dynamo.testing import CompileCounterWithBackend

    m, batch = _build(transformers, torch, model, dropout)
    if not reference:
        steps = [_step(m, m, batch, seed, torch) for seed in range(STEPS)]
        torch.save(steps, f"{sys.argv[-1]}.pt")
        return {"saved": True}
    want = torch.load(reference)
    counter = CompileCounterWithBackend("eager")
    compiled = torch.compile(m, backend=counter)
    worst, zero_for_none = 0.0, 0
    for seed in range(STEPS):
        loss, grads = _step(compiled, m, batch, seed, torch)
        ref_loss, ref_grads = want[seed]
        worst = max(worst, (loss - ref_loss).abs().item())
        for k, g in grads.items():
            r = ref_grads[k]
            if r is None or g is None:
                zero_for_none += r is None and g is not None and g.abs().max().item() == 0
                continue
            worst = max(worst, (g - r).abs().max().item())
    return {"graphs": counter.frame_count, "max_diff": worst, "zero_for_none": zero_for_none}


def _run(path: str | None, *args: str) -> dict:
    env_path = [path] if path else []
    code = ("import sys, json; sys.path[:0] = %r; sys.argv[-1:] = [%r]; import benchmarks.layerdrop_select as b; "
            "print(json.dumps(b.worker(%r, %s, %r)))" % (env_path, args[3], args[0], args[1], args[2]))
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fixed", required=True, help="folder holding the repaired `transformers` package")
    ap.add_argument("--tmp", default="/tmp/layerdrop_select")
    a = ap.parse_args()
    print(f"{'model':<26}{'dropout':>8}{'graphs original':>17}{'graphs repaired':>17}"
          f"{'max |diff|, original':>22}{'max |diff|, repaired':>22}{'zero for None':>15}")
    for model in MODELS:
        for dropout in (0.0, 0.1):
            ref = f"{a.tmp}-{model}-{dropout}"
            _run(None, model, str(dropout), "", ref)
            orig = _run(None, model, str(dropout), f"{ref}.pt", ref)
            fixed = _run(a.fixed, model, str(dropout), f"{ref}.pt", ref)
            print(f"{model:<26}{dropout:>8}{orig['graphs']:>17}{fixed['graphs']:>17}{orig['max_diff']:>22.3g}"
                  f"{fixed['max_diff']:>22.3g}"
                  f"{fixed['zero_for_none']:>15}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
