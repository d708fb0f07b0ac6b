"""A repair whose helper acts only on torch 2.13 and later (the integer-buffer fold, the folded method, the stored
slice of captured bounds) is declined, with the reason, where the repaired code runs on an earlier torch: the
installed torch's version (its metadata; torch is not imported), or ``target-torch`` in ``[tool.mend]``. On torch
2.11 the corpus recorded those repairs written and the break kept at their site."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from mend.analyzers.static import config as static_config
from mend.cli.app import app
from mend.rewriter.options import FixOptions
from mend.rewriter.strategies.int_buffers import EXAMPLES

FOLD = next(e for e in EXAMPLES if e.unsafe)


def _project(tmp_path: Path, target: str | None) -> Path:
    table = f'[tool.mend]\ntarget-torch = "{target}"\n' if target else "[tool.mend]\n"
    (tmp_path / "pyproject.toml").write_text(table)
    (tmp_path / "m.py").write_text(FOLD.before)
    return tmp_path / "m.py"


@pytest.mark.parametrize(("target", "applied"), [("2.11", False), ("2.13", True), ("2.14.1", True)])
def test_a_helper_for_a_later_torch_is_declined_for_an_earlier_target(tmp_path: Path, target: str,
                                                                       applied: bool) -> None:
    path = _project(tmp_path, target)
    before = path.read_bytes()
    runner = CliRunner()
    diff = runner.invoke(app, ["fix", "--unsafe-fixes", "--diff", str(path)])
    assert diff.exit_code == 1, diff.output  # a change to make, or a finding left
    assert f"Would fix {1 if applied else 0} finding(s)" in diff.output
    fixed = runner.invoke(app, ["fix", "--unsafe-fixes", str(path)])
    assert fixed.exit_code == (0 if applied else 1), fixed.output  # 1: a finding remains
    if applied:
        assert path.read_text() == FOLD.after
        return
    assert path.read_bytes() == before
    assert "acts on torch 2.13 and later, and the target is torch 2.11" in fixed.output
    # mend check marks the finding with what mend fix decided for this target: no fix to promise
    checked = runner.invoke(app, ["check", str(path)])
    assert "[*]" not in checked.output and "hidden" not in checked.output.split("Found")[-1]


def test_the_target_is_the_installed_torch_unless_the_configuration_names_one(monkeypatch) -> None:
    monkeypatch.setattr(static_config.metadata, "version", lambda name: "2.11.0+cu128")
    assert static_config.target_torch({}) == (2, 11)
    assert static_config.target_torch({"target-torch": "2.13"}) == (2, 13)

    def missing(name: str) -> str:
        raise static_config.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(static_config.metadata, "version", missing)
    assert static_config.target_torch({}) is None
    assert FixOptions(target_torch=None).torch_before((2, 13)) is None  # not known: every repair is written
    assert FixOptions(target_torch=(2, 11)).torch_before((2, 13)).startswith("the repair's helper acts on torch 2.13")
