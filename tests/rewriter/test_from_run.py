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


def record(root: Path, path: str, line: int, text: str, data_file: Path) -> Path:
    """A data file as ``mend run`` in ``root`` writes it: one print break at ``path:line``."""
    run = rdata.RunData(root=str(root), breaks=[rdata.BreakSite(
        path=path, line=line, function="helper", gb_type="Failed to trace builtin operator",
        registry_id="GB0059", message="Dynamo does not know how to trace builtin operator `print`",
        source_line=text)])
    rdata.save(run, data_file)
    return data_file


def test_from_run_on_a_copy_repairs_the_copy_and_never_the_checkout(tmp_path: Path, monkeypatch) -> None:
    """A run recorded on the original checkout, applied to a copy: the copy's file is repaired (the same
    place relative to the run's root), the checkout's bytes are untouched."""
    checkout, copy = tmp_path / "checkout", tmp_path / "copy"
    for root in (checkout, copy):
        (root / "pkg").mkdir(parents=True)
        (root / "pkg" / "__init__.py").write_text("")
        (root / "pkg" / "mod.py").write_text(SRC)
    data_file = record(checkout, "pkg/mod.py", 6, 'print("helper saw", y.shape)', tmp_path / "run.json")
    before = (checkout / "pkg" / "mod.py").read_bytes()
    monkeypatch.chdir(tmp_path)
    for target in ("copy", "copy/pkg", "copy/pkg/mod.py"):
        (copy / "pkg" / "mod.py").write_text(SRC)
        result = CliRunner().invoke(app, ["fix", "--from-run", str(data_file), target])
        assert result.exit_code == 0, result.output
        assert "copy/pkg/mod.py:6:5: MND101 fixed" in result.output, result.output
        assert "if not torch.compiler.is_compiling():\n        print(" in (copy / "pkg" / "mod.py").read_text()
        assert (checkout / "pkg" / "mod.py").read_bytes() == before


def test_from_run_names_the_sites_not_found_under_the_paths(tmp_path: Path, monkeypatch) -> None:
    """A recorded site whose line is nowhere under PATH (the copy was edited, or holds other files) is
    named in a note and repaired nowhere: exit 0, every file's bytes unchanged."""
    checkout, copy = tmp_path / "checkout", tmp_path / "copy"
    (checkout / "pkg").mkdir(parents=True)
    (checkout / "pkg" / "mod.py").write_text(SRC)
    (copy / "pkg").mkdir(parents=True)
    edited = SRC.replace("    y = x.cos()\n", "    y = x.cos()\n    y = y + 1\n")
    (copy / "pkg" / "mod.py").write_text(edited)
    data_file = record(checkout, "pkg/mod.py", 6, 'print("helper saw", y.shape)', tmp_path / "run.json")
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["fix", "--from-run", str(data_file), "copy"])
    assert result.exit_code == 0, result.output
    assert (f"note: {checkout / 'pkg' / 'mod.py'}:6: MND101 recorded by mend run: not found under copy "
            '(no file there has `print("helper saw", y.shape)` at line 6); not fixed') in result.output
    assert (copy / "pkg" / "mod.py").read_text() == edited and (checkout / "pkg" / "mod.py").read_text() == SRC


ITEM = '''import torch


@torch.compile
def step(x: torch.Tensor) -> torch.Tensor:
    y = x.cos()
    n = y.sum().item()
    return y / n
'''


def test_a_site_both_found_and_recorded_is_listed_once(tmp_path: Path) -> None:
    """A recorded `.item()` break that the static check also finds: one "not fixed" line, one remaining."""
    (tmp_path / "model.py").write_text(ITEM)
    run = rdata.RunData(root=str(tmp_path), breaks=[rdata.BreakSite(
        path="model.py", line=7, function="step", gb_type="Unsupported Tensor.item() call",
        registry_id="GB0124", message="Dynamo does not support tracing Tensor.item()",
        source_line="n = y.sum().item()")])
    data_file = tmp_path / "run.json"
    rdata.save(run, data_file)
    result = CliRunner().invoke(app, ["fix", "--diff", "--from-run", str(data_file), str(tmp_path / "model.py")])
    assert result.exit_code == 1, result.output
    lines = [ln for ln in result.output.splitlines() if "not fixed" in ln]
    assert lines == [ln for ln in lines if ln.startswith(f"{tmp_path / 'model.py'}:7:9: MND301 not fixed")]
    assert len(lines) == 1 and "1 remaining" in result.output, result.output
