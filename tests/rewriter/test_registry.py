"""One rule registry: the rules, the strategies each lists, the strategy modules and the rule pages agree."""

from __future__ import annotations

import pkgutil
from pathlib import Path

from typer.testing import CliRunner

from mend.analyzers.static.rules import RULES
from mend.cli.app import app
from mend.rewriter import FixOptions, fix_source
from mend.rewriter import strategies as strategy_package
from mend.rewriter.registry import strategies, strategy_module
from tests.rewriter.conftest import diag

REPO = Path(__file__).resolve().parents[2]
MODULES = sorted(m.name for m in pkgutil.iter_modules(strategy_package.__path__))


def test_every_rule_that_declares_a_fix_lists_strategies_that_exist() -> None:
    fixable = {c for c, r in RULES.items() if r.fix is not None}
    assert len(fixable) >= 20 and set(strategies()) == fixable
    for code in fixable:
        names = RULES[code].fix.strategies
        assert names and len(set(names)) == len(names), code
        assert [s.name for s in strategies()[code]] == list(names), code
        for name in names:
            assert name in MODULES, (code, name)
            assert callable(strategy_module(name).repair), name


def test_every_strategy_module_is_listed_by_a_rule() -> None:
    listed = {name for r in RULES.values() if r.fix is not None for name in r.fix.strategies}
    assert set(MODULES) == listed
    assert len(MODULES) >= 30


def test_a_finding_without_fix_is_left_with_the_rules_reason() -> None:
    src = "import torch\n\n\ndef f(x: torch.Tensor):\n    while x.abs().sum() > 1:\n        x = x / 2\n    return x\n"
    res = fix_source(src, "t.py", [diag("MND202", 5, 11), diag("MND107", 6, 9)], FixOptions(unsafe=True))
    assert res.fixed == src and res.applied == []
    reasons = {r.diagnostic.code: r.reason for r in res.remaining}
    assert reasons["MND202"] == RULES["MND202"].no_fix and "while_loop" in reasons["MND202"]
    assert reasons["MND107"] == "no automatic fix for this rule"


def test_rule_pages_are_generated_from_the_registry(tmp_path: Path) -> None:
    """`mend rule --write-docs` writes the committed pages, fix safety included."""
    r = CliRunner().invoke(app, ["rule", "--write-docs", str(tmp_path)])
    assert r.exit_code == 0, r.output
    committed = REPO / "docs" / "rules"
    written = sorted(p.name for p in tmp_path.glob("*.md"))
    assert written == sorted(p.name for p in committed.glob("*.md"))
    for name in written:
        assert (tmp_path / name).read_text(encoding="utf-8") == (committed / name).read_text(encoding="utf-8"), (
            f"docs/rules/{name} is stale: run `mend rule --write-docs docs/rules`")
    for code, rule in RULES.items():
        page = (tmp_path / f"{code}.md").read_text(encoding="utf-8")
        if rule.fix is None:
            assert "No automatic fix is available." in page, code
        else:
            head = f"available ({rule.fix.applicability}): {rule.fix.summary}."
            assert head in page and rule.fix.safety_doc.strip() in page, code
