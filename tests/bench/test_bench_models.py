"""benchmarks/bench_models.py: the harness set is consistent, and the repair removes the documented breaks."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "bench_models.py"


def _module():
    spec = importlib.util.spec_from_file_location("bench_models", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_model_has_a_harness_and_a_folder() -> None:
    bm = _module()
    assert len(bm.MODELS) >= 4
    for name in bm.MODELS:
        assert callable(getattr(bm, name))
        assert name in bm.TRANSFORMERS_DIRS


@pytest.mark.parametrize("size", ["tiny", "small"])
def test_window_does_not_divide_the_sequence(size: str) -> None:
    """Longformer/LED must pad (and log): the window never divides the benchmark's sequence length."""
    bm = _module()
    seq = bm.SIZES[size]["seq"]
    window, padded = bm._window(seq)
    assert window % 2 == 0
    assert seq % window != 0
    assert padded % window == 0 and seq < padded < seq + window


COUNT = r'''
import json, os, sys, importlib.util, warnings
warnings.filterwarnings("ignore")
os.environ["MEND_BENCH_MODELS_SIZE"] = "tiny"
import torch, transformers
from mend.analyzers.runtime import record
spec = importlib.util.spec_from_file_location("bm", sys.argv[1])
bm = importlib.util.module_from_spec(spec); spec.loader.exec_module(bm)
model, args, kwargs = getattr(bm, sys.argv[2])()
with torch.no_grad():
    eager = model(*args, **kwargs).last_hidden_state
    with record(source=[os.path.dirname(transformers.__file__)], fast=True) as rec:
        compiled = torch.compile(model, backend="eager")(*args, **kwargs).last_hidden_state
torch.save({"eager": eager, "compiled": compiled}, sys.argv[3] + ".pt")
json.dump({"file": transformers.__file__, "graphs": rec.graphs, "breaks": len(rec.breaks)}, open(sys.argv[3], "w"))
'''


@pytest.mark.slow
def test_repaired_copy_removes_the_xlm_breaks(tmp_path: Path) -> None:
    """`--make-fixed --unsafe-fixes` on XLM: 2 break sites -> 0, one graph, the same output."""
    pytest.importorskip("transformers")
    import torch

    bm = _module()
    bm.make_fixed(tmp_path / "fixed", ["xlm"], unsafe=True)
    script = tmp_path / "count.py"
    script.write_text(COUNT)
    res = {}
    for tag, path in (("before", None), ("after", str(tmp_path / "fixed"))):
        env = dict(os.environ)
        if path:
            env["PYTHONPATH"] = path
        out = tmp_path / f"{tag}.json"
        subprocess.run([sys.executable, str(script), str(SCRIPT), "xlm", str(out)], check=True, env=env,
                       capture_output=True, timeout=600)
        res[tag] = json.loads(out.read_text())
    assert res["after"]["file"].startswith(str(tmp_path / "fixed"))
    assert res["before"]["breaks"] == 2 and res["before"]["graphs"] > 1
    assert res["after"]["breaks"] == 0 and res["after"]["graphs"] == 1
    before = torch.load(tmp_path / "before.json.pt")
    after = torch.load(tmp_path / "after.json.pt")
    assert torch.equal(before["eager"], after["compiled"])
