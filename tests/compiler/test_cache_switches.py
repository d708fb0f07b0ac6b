"""The graph cache's key holds every switch that changes the scheduled graph it keeps.

The graph cache (``runtime/graph_cache.py``) keeps the output of lowering and scheduling; its key takes the
switches from the settings table (``mend.settings``: those marked ``keys_cache``). Two checks that a switch
changing that output cannot be left out:

* by outcome: each switch of the table, set to each value it takes besides its default, on graphs that
  exercise the stages (matrix products with and without a bias in half precision for the GPU, steps that
  read no input, reductions, on the CPU): where the scheduled graph differs from the default's, the switch
  must key the cache and the graph key must differ;
* by reading: every switch the stages' sources read is marked ``keys_cache``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch.fx.experimental.proxy_tensor import make_fx

from mend import settings
from mend.compiler.lowering.decomps import decomposition_table
from mend.compiler.runtime import graph_cache

from .helpers import lower_and_schedule

COMPILER = Path(settings.__file__).resolve().parents[1] / "compiler"
STAGES = ("lowering", "ir", "schedule")  # what the graph cache keeps is their output


def _masked_softmax(x):
    n = x.shape[-1]
    pos = torch.arange(n)
    seg = torch.cumsum((pos % 3 == 0).to(torch.int64), -1)  # an ATen call that reads no input: computed once
    mask = torch.where((pos[:, None] >= pos[None, :]) & (seg[:, None] == seg[None, :]), 0.0, float("-inf"))
    return (x + mask).softmax(-1)


def _graphs():
    h, w, b = torch.randn(16, 32).half(), torch.randn(24, 32).half(), torch.randn(24).half()
    x = torch.randn(4, 12, 12)
    cases = [("cuda", lambda x, w: F.gelu(F.linear(x, w)), (h, w)),
             ("cuda", lambda x, w, b: F.gelu(F.linear(x, w, b)), (h, w, b)),
             ("cpu", _masked_softmax, (x,)),
             ("cuda", _masked_softmax, (x,)),
             ("cpu", lambda x: x.sum(-1) + x.amax(-1), (torch.randn(8, 4096),))]
    for device, fn, args in cases:
        gm = make_fx(fn, decomposition_table=decomposition_table(), tracing_mode="fake")(*args)
        yield device, gm, list(args)


def _probes(s: settings.Switch) -> list[str]:
    """The values besides the default that ``s`` takes (a sample for open-ended kinds)."""
    if isinstance(s, settings.Flag):
        return [v for v, on in (("1", True), ("0", False)) if s.default != on]
    if isinstance(s, settings.Choice):
        return [c for c in s.choices if c != s.default]
    return {"int": ["1"], "seconds": ["1"], "names": ["all"]}.get(s.kind, [])


def _state(device, gm, args):
    return str(lower_and_schedule(gm, args, device)), graph_cache.graph_key(gm, args)


def _clear(monkeypatch):
    for s in settings.SWITCHES:
        for name in (s.name, s.alias):
            if name:
                monkeypatch.delenv(name, raising=False)


def test_a_switch_that_changes_the_scheduled_graph_keys_the_cache(monkeypatch, tmp_path):
    _clear(monkeypatch)
    graphs = list(_graphs())
    default = [_state(*g) for g in graphs]
    changed = set()
    for s in settings.SWITCHES:
        for value in _probes(s):
            monkeypatch.setenv(s.name, str(tmp_path) if s.kind == "path" else value)
            for g, (want_sg, want_key) in zip(graphs, default):
                sg, key = _state(*g)
                if sg != want_sg:
                    changed.add(s.name)
                    assert s.keys_cache, f"{s.name}={value} changes the scheduled graph but does not key the cache"
                    assert key != want_key, f"{s.name}={value} changes the scheduled graph, not its key"
            monkeypatch.delenv(s.name)
    # the graphs are sensitive: every switch that keys the cache changes one of them (else this test is blind)
    assert changed == {s.name for s in settings.SWITCHES if s.keys_cache}


def test_every_switch_the_stages_read_keys_the_cache():
    read = {}
    for stage in STAGES:
        for path in sorted((COMPILER / stage).rglob("*.py")):
            for name in _switches_read(path.read_text()):
                read.setdefault(name, []).append(str(path.relative_to(COMPILER)))
    assert read, "no stage reads a switch: the scan finds nothing (MEND_FOLD is read by schedule/fold.py)"
    missing = {name: where for name, where in read.items() if not getattr(settings, name).keys_cache}
    assert not missing, f"switches read by the cached stages but not in the cache key: {missing}"


def _switches_read(source: str) -> set[str]:
    """The table's entries a module refers to: ``settings.FOLD`` or ``from mend.settings import FOLD``."""
    tree = ast.parse(source)
    names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
             and n.value.id == "settings"}
    names |= {a.asname or a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
              and n.module == "mend.settings" for a in n.names}
    return {n for n in names if isinstance(getattr(settings, n, None), settings.Switch)}


@pytest.mark.parametrize("value", ["0", "false", "off"])
def test_the_key_follows_the_value_not_its_spelling(monkeypatch, value):
    _clear(monkeypatch)
    before = settings.cache_key()
    monkeypatch.setenv("MEND_FOLD", value)
    off = settings.cache_key()
    assert off != before and re.search(r"MEND_FOLD=0\b", off)
    monkeypatch.setenv("MEND_FOLD", "0")
    assert settings.cache_key() == off
