"""`mend report` on crafted data files (issue 36): it reads no file outside the run's root, a deeply nested
file is a data-file error (exit 2), a partial `repaired` record does not crash it, SARIF URIs are encoded."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from mend.analyzers.runtime import data as rd
from mend.cli.app import app


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def _break(path: str, line: int = 1) -> rd.BreakSite:
    return rd.BreakSite(path, line, "f", "Data-dependent branching", "GB0170", "Detected data-dependent branching")


def _save(tmp_path: Path, root: str, *paths: str) -> Path:
    data = rd.RunData(root=root, runs=[rd.RunInfo(argv=["p.py"], exit_code=0)], breaks=[_break(p) for p in paths])
    out = tmp_path / "run.json"
    rd.save(data, out)
    return out


def test_the_html_report_embeds_only_python_files_under_the_root(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    (project / "model.py").write_text("INSIDE_THE_ROOT = 1\n")
    (tmp_path / "secret.py").write_text("SECRET_OUTSIDE = 1\n")
    (project / "notes.txt").write_text("NOT_PYTHON = 1\n")
    (project / "link.py").symlink_to(tmp_path / "secret.py")
    data = _save(tmp_path, str(project), "model.py", "../secret.py", "link.py", "notes.txt", str(tmp_path / "secret.py"))
    out = tmp_path / "r.html"
    res = invoke("report", "--data-file", str(data), "--format", "html", "--no-static", "-o", str(out))
    assert res.exit_code in (0, 1), res.output
    page = out.read_text()
    assert "INSIDE_THE_ROOT" in page
    assert "SECRET_OUTSIDE" not in page and "NOT_PYTHON" not in page


def test_a_root_of_slash_embeds_nothing(tmp_path: Path) -> None:
    (tmp_path / "model.py").write_text("SOMEWHERE_ON_DISK = 1\n")
    data = _save(tmp_path, "/", str(tmp_path / "model.py").lstrip("/"), "etc/passwd")
    out = tmp_path / "r.html"
    invoke("report", "--data-file", str(data), "--format", "html", "--no-static", "-o", str(out))
    page = out.read_text()
    assert "SOMEWHERE_ON_DISK" not in page and "root:" not in page


def test_a_deeply_nested_data_file_is_a_data_file_error(tmp_path: Path) -> None:
    bad = tmp_path / "run.json"
    bad.write_text('{"version": 1, "tool": ' + "[" * 100_000 + "]" * 100_000 + "}")
    res = invoke("report", "--data-file", str(bad), "--no-static")
    assert res.exit_code == 2
    assert "nested too deeply" in res.output


def test_a_partial_repaired_record_does_not_crash_the_report(tmp_path: Path) -> None:
    out = _save(tmp_path, str(tmp_path))
    raw = json.loads(out.read_text())
    raw["repaired"] = [{"module": "m", "path": "m.py", "status": "repaired", "applied": [{"code": "MND101", "line": 3}]}]
    out.write_text(json.dumps(raw))
    assert rd.schema_problem(raw) is None  # schema-valid
    res = invoke("report", "--data-file", str(out), "--no-static")
    assert res.exit_code in (0, 1), res.output
    assert "m.py:3: MND101" in res.output


def test_sarif_uris_are_percent_encoded(tmp_path: Path) -> None:
    data = _save(tmp_path, str(tmp_path), "my dir/a#b%c.py", "naïve.py", "/abs path/x.py")
    doc = json.loads(invoke("report", "--data-file", str(data), "--format", "sarif", "--no-static").output)
    uris = sorted(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in doc["runs"][0]["results"])
    assert uris == ["file:///abs%20path/x.py", "my%20dir/a%23b%25c.py", "na%C3%AFve.py"]
