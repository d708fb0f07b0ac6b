"""A real library: repair a copy of the installed transformers and compile Longformer from it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")

WORKER = r'''
import json, sys
import torch
import transformers
from transformers import LongformerConfig, LongformerModel
from mend.analyzers.runtime import record

torch.manual_seed(0)
cfg = LongformerConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                       attention_window=[4, 4], vocab_size=100, max_position_embeddings=80)
model = LongformerModel(cfg).eval()
ids = torch.randint(3, 100, (2, 14), generator=torch.Generator().manual_seed(1))  # padded to 16
src = transformers.__file__.rsplit("/", 1)[0]
with torch.no_grad():
    eager = model(input_ids=ids).last_hidden_state
    torch._dynamo.reset()
    with record(source=[src], fast=True) as rec:
        compiled = torch.compile(model)(input_ids=ids).last_hidden_state
torch.save({"eager": eager, "compiled": compiled}, sys.argv[1] + ".pt")
json.dump({"file": transformers.__file__, "graphs": rec.graphs,
           "breaks": sorted(f"{b.path.rsplit('/', 1)[-1]}:{b.line}:{b.registry_id}" for b in rec.breaks)},
          open(sys.argv[1], "w"))
'''


def _run(tmp: Path, tag: str, pythonpath: str | None) -> dict:
    script = tmp / "worker.py"
    script.write_text(WORKER)
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    out = tmp / f"{tag}.json"
    subprocess.run([sys.executable, str(script), str(out)], check=True, env=env, capture_output=True, timeout=900)
    return json.loads(out.read_text())


@pytest.mark.slow
def test_repaired_transformers_copy_compiles_longformer_with_fewer_breaks(tmp_path: Path) -> None:
    import torch

    site = tmp_path / "site"
    pkg = site / "transformers"
    shutil.copytree(Path(transformers.__file__).parent, pkg, ignore=shutil.ignore_patterns("__pycache__"))
    target = pkg / "models" / "longformer"
    fix = subprocess.run([sys.executable, "-m", "mend.cli", "fix", str(target)], capture_output=True, text=True,
                         timeout=900)
    assert "MND102 fixed" in fix.stdout, fix.stdout + fix.stderr
    repaired = (target / "modeling_longformer.py").read_text()
    assert "if not torch.compiler.is_compiling():\n                logger.warning_once(" in repaired
    again = subprocess.run([sys.executable, "-m", "mend.cli", "fix", str(target)], capture_output=True, text=True,
                           timeout=900)
    assert (target / "modeling_longformer.py").read_text() == repaired, again.stdout

    before = _run(tmp_path, "before", None)
    after = _run(tmp_path, "after", str(site))
    assert after["file"].startswith(str(site))  # the repaired copy was imported
    assert len(before["breaks"]) == 2 and after["graphs"] < before["graphs"]
    assert len(after["breaks"]) < len(before["breaks"])
    a = torch.load(tmp_path / "before.json.pt")
    b = torch.load(tmp_path / "after.json.pt")
    assert torch.equal(a["eager"], b["eager"])
    torch.testing.assert_close(b["compiled"], a["eager"], rtol=1.3e-6, atol=1e-5)


@pytest.mark.parametrize("model", ["mimi", "encodec"])
def test_int_buffers_fold_on_the_audio_codecs(model: str) -> None:
    """MND310 on transformers' EnCodec/Mimi convolution (sites `mend check` reports in Mimi, and the
    recorded `F.pad` site in EnCodec): the padding method gets the exact integer form and every buffer
    the forward passes on is read as a number under compile; eager lines are kept."""
    from mend.analyzers.diagnostic import Diagnostic
    from mend.rewriter import FixOptions, fix_source

    path = Path(transformers.__file__).parent / "models" / model / f"modeling_{model}.py"
    src = path.read_text()
    lines = src.splitlines()
    at = next(i for i, ln in enumerate(lines) if "return nn.functional.pad(hidden_states, paddings, mode, value)" in ln)
    diag = Diagnostic(code="MND310", message="site", path=str(path), line=at + 1,
                      col=lines[at].index("nn.functional.pad") + 1)
    res = fix_source(src, str(path), [diag], FixOptions(unsafe=True))
    assert res.error is None and len(res.applied) == 1, [r.reason for r in res.remaining]
    fixed = res.fixed
    assert "_mend_a1 = ((length - _mend_fold(getattr, self, \"kernel_size\"))" in fixed
    assert "-((-(_mend_a1 + _mend_c1 * _mend_b1)) // _mend_b1)" in fixed
    assert '(_mend_fold(getattr, self, "padding_total"), extra_padding)' in fixed
    kept = [ln for ln in lines if "self.kernel_size + self.padding_total) / self.stride + 1" in ln]
    assert kept and all(ln in fixed.splitlines() for ln in kept)  # the original arithmetic stays for eager
    assert fix_source(src, str(path), [diag], FixOptions()).remaining[0].unsafe_available
