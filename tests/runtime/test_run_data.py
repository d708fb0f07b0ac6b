"""The run data file on read (validated against its published schema) and `mend gate` on a run that failed
or compiled nothing."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from mend.analyzers.runtime import data as rd
from mend.cli.app import app


def run_data(exit_code: int | None = 0, graphs: int = 2, breaks: int = 1) -> rd.RunData:
    return rd.RunData(
        root="/project",
        runs=[rd.RunInfo(argv=["train.py", "--epochs", "1"], exit_code=exit_code, torch="2.13.0", kind="run")],
        breaks=[rd.BreakSite("model.py", 7 + i, "forward", "Data-dependent branching", "GB0170", "branching",
                             hints=["use torch.cond"], stack=[["model.py", 7 + i, "forward"]],
                             regions=["model.py:6:forward"]) for i in range(breaks)],
        recompiles=[rd.RecompileSite("model.py", 10, "forward", "int-attribute", guard="self.step == 3")],
        regions=[rd.Region("model.py:6:forward", "model.py", 6, "forward", graphs=graphs, compiles=2)] if graphs else [],
        tests={"tests/test_model.py::test_forward": {"breaks": 1, "recompiles": 0, "graphs": 2}},
    )


def gate(tmp_path: Path, data: rd.RunData, *args: str):
    rd.save(data, tmp_path / "run.json")
    return CliRunner().invoke(app, ["gate", "--data-file", str(tmp_path / "run.json"),
                                    "--max-graph-breaks", "5", "--max-recompiles", "5", *args])


# --- mend gate on the run itself -----------------------------------------------------------------

def test_gate_passes_a_good_run_within_budget(tmp_path: Path) -> None:
    res = gate(tmp_path, run_data())
    assert res.exit_code == 0, res.output
    assert "passed" in res.output


def test_gate_fails_a_run_whose_program_failed(tmp_path: Path) -> None:
    res = gate(tmp_path, run_data(exit_code=3))
    assert res.exit_code == 1
    assert "the recorded run exited with code 3 (train.py --epochs 1)" in res.output
    res = gate(tmp_path, run_data(exit_code=3), "--ignore-run-status")
    assert res.exit_code == 0, res.output


def test_gate_fails_a_run_that_compiled_nothing(tmp_path: Path) -> None:
    res = gate(tmp_path, run_data(graphs=0, breaks=0))
    assert res.exit_code == 1
    assert "the run compiled nothing" in res.output
    assert gate(tmp_path, run_data(graphs=0, breaks=0), "--ignore-run-status").exit_code == 0
    baseline = tmp_path / "baseline.json"
    rd.save(run_data(graphs=0, breaks=0), tmp_path / "run.json")
    res = CliRunner().invoke(app, ["gate", "--data-file", str(tmp_path / "run.json"), "--baseline", str(baseline),
                                   "--update-baseline"])
    assert res.exit_code == 1 and not baseline.exists()  # an empty run does not become the baseline


@pytest.mark.slow
def test_gate_after_mend_run_of_a_failing_program(tmp_path: Path) -> None:
    """End to end: `mend run` of a program that exits 3 without compiling anything, then `mend gate`."""
    (tmp_path / "prog.py").write_text("import sys\nprint('working')\nsys.exit(3)\n")

    def mend(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "mend.cli", *args], cwd=tmp_path, capture_output=True, text=True,
                              timeout=300)

    assert mend("run", "prog.py").returncode == 3
    res = mend("gate")
    assert res.returncode == 1, res.stdout + res.stderr
    assert "exited with code 3" in res.stdout and "compiled nothing" in res.stdout


# --- the data file on read -----------------------------------------------------------------------

@pytest.mark.parametrize("command", [["report"], ["report", "--format", "json"], ["gate"]])
def test_a_wrong_type_is_one_line_and_exit_2(tmp_path: Path, command: list[str]) -> None:
    raw = run_data().to_dict()
    raw["breaks"][0]["path"] = 3
    (tmp_path / "run.json").write_text(json.dumps(raw))
    res = CliRunner().invoke(app, [*command, "--data-file", str(tmp_path / "run.json")])
    assert res.exit_code == 2
    assert res.exception is None or isinstance(res.exception, SystemExit)
    assert res.output.strip().splitlines() == [
        f"mend: {tmp_path / 'run.json'}: malformed data file: breaks[0].path must be a string, got 3 "
        "(see the schema run-data.schema.json)"]


def test_the_schema_is_published_and_valid() -> None:
    schema = rd.schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    used = set()

    def keywords(node: Any, in_properties: bool = False) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if not in_properties:
                    used.add(key)
                keywords(value, in_properties=key in ("properties", "$defs") and not in_properties)
        elif isinstance(node, list):
            for item in node:
                keywords(item)

    keywords(schema)
    assert used <= rd.SCHEMA_KEYWORDS, used - rd.SCHEMA_KEYWORDS  # mend's reader knows every keyword used
    assert jsonschema.Draft202012Validator(schema).is_valid(run_data().to_dict())
    assert rd.SCHEMA_FILE.name in {p.name for p in rd.SCHEMA_FILE.parent.iterdir()}


JSON = st.recursive(st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False, width=32)
                    | st.text(max_size=3), lambda inner: st.lists(inner, max_size=2)
                    | st.dictionaries(st.text(max_size=3), inner, max_size=2), max_leaves=4)


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            out += _paths(value, (*prefix, i))
    return out


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_mends_reader_agrees_with_jsonschema(data: st.DataObject) -> None:
    """Replace or delete one part of a valid data file: mend accepts it exactly when jsonschema does."""
    raw = run_data().to_dict()
    doc = copy.deepcopy(raw)
    path = data.draw(st.sampled_from(_paths(raw)[1:]))
    parent = doc
    for key in path[:-1]:
        parent = parent[key]
    if data.draw(st.booleans()) and isinstance(parent, dict):
        del parent[path[-1]]
    else:
        parent[path[-1]] = data.draw(JSON)
    expected = jsonschema.Draft202012Validator(rd.schema()).is_valid(doc)
    assert (rd.schema_problem(doc) is None) == expected, (path, rd.schema_problem(doc))
    if expected:
        rd.RunData.from_dict(doc)  # what the schema accepts, mend can read


@pytest.mark.parametrize("status", ["", "done", "running"])
def test_a_run_status_is_one_of_three_for_mend_and_the_schema(status: str) -> None:
    """The schema names the three statuses mend reads (hypothesis found `status: ""` valid for one, not the other)."""
    doc = run_data().to_dict()
    doc["runs"][0]["status"] = status
    valid = jsonschema.Draft202012Validator(rd.schema()).is_valid(doc)
    assert valid == (status == "running")
    assert (rd.schema_problem(doc) is None) == valid
