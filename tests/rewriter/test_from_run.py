"""``mend fix --from-run``: sites recorded by ``mend run`` are repaired even where static analysis is silent."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from mend.analyzers.runtime import data as rdata
from mend.cli.app import app

SRC = '''import torch


def helper(x: torch.Tensor) -> torch.Tensor:
    y = x.cos()
    print("helper saw", y.shape)
    return y


def get_fn():
    return helper
'''


def test_from_run_repairs_recorded_break(tmp_path: Path) -> None:
    mod = tmp_path / "mod.py"
    mod.write_text(SRC)
    run = rdata.RunData(root=str(tmp_path), breaks=[rdata.BreakSite(
        path="mod.py", line=6, function="helper", gb_type="Failed to trace builtin operator",
        registry_id="GB0059", message="Dynamo does not know how to trace builtin operator `print`",
        source_line='print("helper saw", y.shape)')])
    data_file = tmp_path / ".mend" / "run.json"
    data_file.parent.mkdir()
    rdata.save(run, data_file)
    result = CliRunner().invoke(app, ["fix", "--from-run", str(data_file), str(tmp_path)])
    assert "MND101 fixed" in result.output, result.output
    assert "if not torch.compiler.is_compiling():\n        print(" in mod.read_text()


def test_from_run_bad_file_is_a_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "run.json"
    bad.write_text("{not json")
    result = CliRunner().invoke(app, ["fix", "--from-run", str(bad), str(tmp_path)])
    assert result.exit_code == 2
    assert "cannot read" in result.output
