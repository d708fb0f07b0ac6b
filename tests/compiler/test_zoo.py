"""benchmarks/compiler_zoo.py end to end on one real architecture (a model built from a small config)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("transformers")

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_zoo_compares_mend_with_eager_on_a_real_model(tmp_path):
    out = tmp_path / "zoo.json"
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "compiler_zoo.py"), "--models", "bert",
                           "--json", str(out)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    r = json.loads(out.read_text())["bert"]
    assert r["diff"] <= 1e-4 and r["graphs"] == 1 and r["kernels"] > 0
    assert r["fallback_graphs"] == 0 and r["interpreted_kernels"] == 0
    assert "1/1 ok" in proc.stdout
