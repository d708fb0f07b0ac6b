"""The rules are honest: for every fixture, what `mend check` reports is what Dynamo really does.

Each fixture under ``fixtures/`` marks the findings it must produce with ``# expect: MNDxxx``
comments and has a ``drive()`` that runs its code under ``torch.compile(backend="eager")``.

1. Static: the findings of `mend check` on the fixture are exactly its ``# expect:`` comments.
2. Dynamic (one subprocess for all fixtures, fresh Dynamo state per fixture; torch 2.13 here):
   * a "break" finding has a graph break logged at its line;
   * a "frame-skip" finding has a break inside its statement after which Dynamo skipped the frame;
   * a "recompile" finding comes with at least one recompile;
   * and nothing else happens: every logged break is at a reported line or inside a reported
     frame-skip statement, and a fixture without recompile findings never recompiles.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mend.analyzers.static import Config, check_paths
from mend.analyzers.static.rules import RULES
from tests.static.conftest import HERE, expected, fixture_files

FIXTURES = fixture_files()
IDS = [p.stem for p in FIXTURES]


def test_every_rule_has_positive_and_negative_fixtures():
    stems = {p.stem for p in FIXTURES}
    for code, rule in RULES.items():
        if rule.kind == "meta":
            continue
        low = code.lower()
        assert any(s.startswith(f"{low}_pos") for s in stems), f"{code} has no positive fixture"
        assert any(s.startswith(f"{low}_neg") for s in stems), f"{code} has no negative fixture"
        assert any((code in {c for _, c in expected(p)}) for p in FIXTURES if p.stem.startswith(f"{low}_pos"))


@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_static_findings_match_expectations(path: Path):
    result = check_paths([path], Config(), use_cache=False)
    got = {(d.line, d.code) for d in result.diagnostics}
    assert got == expected(path)


@pytest.fixture(scope="module")
def dynamo(tmp_path_factory) -> dict:
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("probe") / "dynamo.json"
    env = dict(os.environ, PYTHONBREAKPOINT="0")
    proc = subprocess.run([sys.executable, str(HERE / "dynamo_probe.py"), str(out), *map(str, FIXTURES)],
                          capture_output=True, text=True, timeout=1200, env=env, cwd=str(HERE))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(out.read_text())["results"]


def _statement_range(path: Path, line: int) -> tuple[int, int]:
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, (ast.For, ast.While, ast.Try, ast.With)) and node.lineno == line:
            return node.lineno, node.end_lineno or node.lineno
    raise AssertionError(f"no compound statement at line {line}")


def _in_ranges(lines, ranges) -> bool:
    return any(a <= ln <= b for ln in lines for a, b in ranges)


@pytest.mark.slow
@pytest.mark.xdist_group("dynamo-honesty")
@pytest.mark.parametrize("path", FIXTURES, ids=IDS)
def test_dynamo_agrees(path: Path, dynamo: dict):
    r = dynamo[str(path)]
    assert r["error"] is None, r["error"]
    exp = expected(path)
    breaks = r["breaks"]
    break_lines = {ln for ln, c in exp if RULES[c].kind == "break"}
    skip_ranges = [_statement_range(path, ln) for ln, c in exp if RULES[c].kind == "frame-skip"]
    for ln in sorted(break_lines):
        assert any(b["line"] == ln for b in breaks), f"no graph break at line {ln}: {breaks}"
    for rng in skip_ranges:
        assert any(b["skip"] and _in_ranges(b["lines"], [rng]) for b in breaks), \
            f"no frame skip inside lines {rng}: {breaks}"
    for b in breaks:
        assert b["line"] in break_lines or _in_ranges(b["lines"], skip_ranges), \
            f"unreported graph break at line {b['line']} ({b['gb_type']})"
    if any(RULES[c].kind == "recompile" for _, c in exp):
        assert r["recompiles"] >= 1, "a recompile finding without a recompile"
    else:
        assert r["recompiles"] == 0, f"{r['recompiles']} unreported recompiles"
