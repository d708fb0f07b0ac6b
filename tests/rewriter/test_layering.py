"""The rewriter's strategies are leaves: one never imports another, the engine or the registry (the engine
runs them; the project-wide layering rules are tests/test_layering.py's)."""

from __future__ import annotations

from tests.test_layering import imports_of, product_modules

PACKAGE = "mend.rewriter"


def test_strategies_do_not_import_each_other_or_the_engine() -> None:
    mods = product_modules()
    found = [f"{n} imports {m}" for n, p in mods.items() if n.startswith(f"{PACKAGE}.strategies.")
             for m, _ in imports_of(n, p, set(mods))
             if m.startswith(f"{PACKAGE}.strategies.") or m in {f"{PACKAGE}.engine", f"{PACKAGE}.registry"}]
    assert found == []
    assert sum(n.startswith(f"{PACKAGE}.strategies.") for n in mods) > 30
