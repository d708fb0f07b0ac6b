"""One rule registry: the rules, the fix each declares, the registered fixers and the rule pages agree."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mend.analyzers.static.rules import RULES
from mend.cli.app import app
from mend.rewriter.engine import FixOptions, fix_source
from mend.rewriter.fixes import fixer, fixers
from tests.rewriter.conftest import diag

REPO = Path(__file__).resolve().parents[2]


def test_every_fixer_belongs_to_a_rule_that_declares_its_fix() -> None:
    registered = fixers()
    assert len(registered) >= 17
    for code, fn in registered.items():
        assert RULES[code].fix is not None, code
        # the fixer lives in the fix module named after the rules module that declares its rule
        family = fn.__module__.rsplit(".", 1)[-1]
        assert fn.__module__ == f"mend.rewriter.fixes.{family}", fn.__module__
        rules_module = importlib.import_module(f"mend.analyzers.static.rules.{family}")
        assert f'"{code}"' in Path(rules_module.__file__).read_text(encoding="utf-8"), (code, family)


def test_every_rule_that_declares_a_fix_has_a_fixer() -> None:
    assert {c for c, r in RULES.items() if r.fix is not None} == set(fixers())


def test_a_fixer_needs_a_rule_with_a_fix_and_only_one_fixer_per_code() -> None:
    def noop(ctx, d):  # pragma: no cover - never registered
        raise AssertionError

    with pytest.raises(ValueError, match="no rule MND202 declares a fix"):
        fixer("MND202")(noop)  # a data-dependent `while` has no repair
    with pytest.raises(ValueError, match="no rule MND999"):
        fixer("MND999")(noop)
    with pytest.raises(ValueError, match="two fixers for MND101"):
        fixer("MND101")(noop)
    assert fixers()["MND101"].__name__ == "fix_side_effect"


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
