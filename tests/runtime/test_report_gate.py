"""`mend report` formats and `mend gate` budgets/baselines on a data file (no program runs here)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from xml.etree import ElementTree as ET

import pytest
from typer.testing import CliRunner

from mend.analyzers.runtime import data as rd
from mend.analyzers.runtime.mapping import code_for_break, findings
from mend.cli.app import app

HERE = Path(__file__).resolve().parent
MODEL = """\
import logging
import torch
logger = logging.getLogger(__name__)

class Block(torch.nn.Module):
    def forward(self, x):
        logger.debug("shape %s", x.shape)
        if torch.isinf(x).any():
            x = x.clamp(-1, 1)
        self.step += 1
        return x * 2
"""
LEGACY = """\
def old(x):
    print("legacy", x)
    return x
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "model.py").write_text(MODEL)
    (tmp_path / "legacy").mkdir()
    (tmp_path / "legacy" / "old.py").write_text(LEGACY)
    monkeypatch.chdir(tmp_path)
    data = rd.RunData(
        root=str(tmp_path),
        runs=[rd.RunInfo(argv=["train.py"], exit_code=0, torch="2.13.0", kind="run")],
        breaks=[
            rd.BreakSite("model.py", 7, "forward", "logging.Logger method not supported for non-export cases", "GB0291",
                         "logging.Logger methods are not supported for non-export cases.", ["Add the logging method to ignore_logging_functions."],
                         count=2, source_line='logger.debug("shape %s", x.shape)', regions=["model.py:6:forward"]),
            rd.BreakSite("model.py", 8, "forward", "Data-dependent branching", "GB0170", "Detected data-dependent branching",
                         count=3, source_line="if torch.isinf(x).any():", regions=["model.py:6:forward"]),
            rd.BreakSite("legacy/old.py", 2, "old", "Failed to trace builtin operator", "GB0059",
                         "Dynamo does not know how to trace builtin operator `print` with argument types ['str']",
                         count=1, frame_skip=True, source_line='print("legacy", x)', regions=["legacy/old.py:1:old"]),
        ],
        recompiles=[
            rd.RecompileSite("model.py", 10, "forward", "int-attribute", count=4, guard="self.step == 3",
                             reason="self.step == 3  # self.step += 1  # model.py:10 in forward", function_path="model.py",
                             function_line=6, source_line="self.step += 1", regions=["model.py:6:forward"]),
        ],
        regions=[
            rd.Region("model.py:6:forward", "model.py", 6, "forward", graphs=7, compiles=8, recompiles=4, breaks=5, compile_time_s=1.5),
            rd.Region("legacy/old.py:1:old", "legacy/old.py", 1, "old", compiles=1, frame_skips=1, breaks=1),
        ],
    )
    rd.save(data, tmp_path / ".mend" / "run.json")
    return tmp_path


def invoke(*args: str):
    return CliRunner().invoke(app, list(args), catch_exceptions=False)


def test_data_file_roundtrip_append_and_errors(project):
    path = project / ".mend" / "run.json"
    data = rd.load(path)
    assert data.graph_break_count == 3 and data.recompile_count == 4 and data.graph_count == 7
    merged = rd.save(data, path, append=True)
    assert len(merged.runs) == 2 and merged.breaks[0].count == 4 and merged.recompile_count == 8
    assert rd.load(path).regions[0].graphs == 14
    for text, message in [
        ("{not json", "is not valid JSON"),
        ('{"version": 99}', "unsupported data file version 99"),
        ('{"version": 1, "breaks": [{"path": "m.py"}]}', "lacks line"),
        ("[1, 2]", "expected a JSON object"),
    ]:
        path.write_text(text)
        with pytest.raises(rd.DataFileError, match=message):
            rd.load(path)
    with pytest.raises(rd.DataFileError, match="no data file"):
        rd.load(project / "missing.json")


def test_rule_mapping_uses_registry_message_and_line(project):
    data = rd.load(project / ".mend" / "run.json")
    codes = {(f.path, f.line): (f.code, f.kind) for f in findings(data, use_static=False)}
    assert codes == {
        ("model.py", 7): ("MND102", "break"),
        ("model.py", 8): ("MND201", "break"),
        ("model.py", 10): ("MND401", "recompile"),
        ("legacy/old.py", 2): ("MND101", "frame-skip"),
    }
    site = rd.BreakSite("m.py", 1, "f", "Attempted to call function marked as skipped", "GB0007",
                        "Dynamo does not know how to trace the builtin `time.perf_counter.`", source_line="t0 = time.perf_counter()")
    assert code_for_break(site) == "MND104"
    site.message, site.source_line = "… the function `save` in file torch/serialization.py …", "torch.save(y, buf)"
    assert code_for_break(site) == "MND107"
    site.registry_id, site.source_line = "GB0036", "idx = torch.nonzero(y)"
    assert code_for_break(site) == "MND304"
    site.registry_id, site.source_line = "GB9999", "anything()"
    assert code_for_break(site) == "MND990"


def test_report_table_lists_sites_and_regions(project):
    res = invoke("report", "--no-static")
    assert res.exit_code == 0
    out = res.output
    for text in ("model.py:7", "MND102", "model.py:10", "recompile", "legacy/old.py:2", "frame skip", "Compiled regions",
                 "3 graph break site(s)", "4 recompile(s)"):
        assert text in out, text


def test_report_json_and_junit_and_github(project):
    res = invoke("report", "--format", "json", "--no-static")
    doc = json.loads(res.output)
    assert doc["summary"]["graph_breaks"] == 3
    assert [(f["path"], f["line"], f["code"], f["source"]) for f in doc["findings"]][:2] == [
        ("legacy/old.py", 2, "MND101", "runtime"),
        ("model.py", 7, "MND102", "runtime"),
    ]
    junit = ET.fromstring(invoke("report", "-f", "junit", "--no-static").output.split("\n", 1)[1])
    assert junit.tag == "testsuites" and junit.get("failures") == "4"
    assert {s.get("name") for s in junit} == {"model.py", "legacy/old.py"}
    gh = invoke("report", "-f", "github", "--no-static").output.splitlines()
    assert gh[0].startswith("::error title=MND101 print-in-compiled-code,file=legacy/old.py,line=2,col=1::whole frame skipped")
    assert any(line.startswith("::warning title=MND401") for line in gh)


def test_report_sarif_validates_against_2_1_0_schema(project):
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((HERE / "sarif-schema-2.1.0.json").read_text())
    doc = json.loads(invoke("report", "--format", "sarif", "--no-static").output)
    jsonschema.validate(doc, schema)
    results = doc["runs"][0]["results"]
    assert len(results) == 4
    assert {r["ruleId"] for r in results} == {"MND101", "MND102", "MND201", "MND401"}
    loc = results[0]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"] == {"uri": "legacy/old.py", "uriBaseId": "%SRCROOT%"} and loc["region"]["startLine"] == 2


def test_report_errors(project):
    res = CliRunner().invoke(app, ["report", "--data-file", "nope.json"])
    assert res.exit_code == 2 and "no data file at nope.json" in res.output
    res = CliRunner().invoke(app, ["report", "--format", "xml"])
    assert res.exit_code == 2 and "unknown format" in res.output


def _pyproject(project: Path, gate: str) -> None:
    (project / "pyproject.toml").write_text("[project]\nname = 'x'\n\n" + textwrap.dedent(gate))


def test_gate_without_budgets_is_strict(project):
    res = invoke("gate")
    assert res.exit_code == 1
    assert "global: 3 graph break sites > 0 allowed" in res.output
    assert "model.py:8: graph break [GB0170] Data-dependent branching (3x)" in res.output
    assert "model.py:10: recompile (int-attribute) of forward: self.step == 3 (4x)" in res.output


def test_gate_budgets_pass_and_fail(project):
    _pyproject(project, """
        [tool.mend.gate]
        max-graph-breaks = 3
        max-recompiles = 4
    """)
    res = invoke("gate")
    assert res.exit_code == 0 and "mend gate: passed" in res.output
    assert invoke("gate", "--max-recompiles", "3").exit_code == 1
    _pyproject(project, """
        [tool.mend.gate]
        max-graph-breaks = 0
        max-recompiles = 10
        [tool.mend.gate.per-file."legacy/*"]
        max-graph-breaks = 1
    """)
    res = invoke("gate")
    assert res.exit_code == 1
    assert "global: 2 graph break sites > 0 allowed" in res.output  # legacy/ is budgeted on its own
    assert "legacy/old.py" not in res.output
    _pyproject(project, """
        [tool.mend.gate]
        max-graph-breaks = 1
        [tool.mend.gate.per-region."forward"]
        max-graph-breaks = 2
        max-recompiles = 1
    """)
    res = invoke("gate")
    assert res.exit_code == 1
    assert 'region "forward": 4 recompiles > 1 allowed' in res.output
    assert "graph break sites" not in res.output


def test_gate_bad_config_and_data_exit_2(project):
    _pyproject(project, "[tool.mend.gate]\nmax-graph-breaks = -1\n")
    res = CliRunner().invoke(app, ["gate"])
    assert res.exit_code == 2 and "max-graph-breaks must be a non-negative integer" in res.output
    _pyproject(project, "[tool.mend.gate]\nmax-breaks = 1\n")
    res = CliRunner().invoke(app, ["gate"])
    assert res.exit_code == 2 and "unknown key(s) max-breaks" in res.output
    res = CliRunner().invoke(app, ["gate", "--data-file", "missing.json"])
    assert res.exit_code == 2 and "no data file" in res.output
    (project / "bad.json").write_text('{"version": 1, "breaks": "x"}')
    res = CliRunner().invoke(app, ["gate", "--data-file", "bad.json"])
    assert res.exit_code == 2 and "malformed" in res.output


def test_gate_baseline(project):
    baseline = project / "mend-baseline.json"
    res = CliRunner().invoke(app, ["gate", "--baseline", str(baseline)])
    assert res.exit_code == 2 and "no baseline file" in res.output
    res = invoke("gate", "--baseline", str(baseline), "--update-baseline")
    assert res.exit_code == 0 and "3 break site(s), 1 recompile site(s)" in res.output
    assert invoke("gate", "--baseline", str(baseline)).exit_code == 0
    # a new break site and more recompiles fail; lines moving does not
    path = project / ".mend" / "run.json"
    data = rd.load(path)
    for site in data.breaks:
        site.line += 5
    data.breaks.append(rd.BreakSite("model.py", 30, "forward", "Unsupported Tensor.item() call with capture_scalar_outputs=False",
                                    "GB0124", "Dynamo does not support tracing `Tensor.item()`", source_line="n = x.sum().item()"))
    data.recompiles[0].count = 6
    rd.save(data, path)
    res = invoke("gate", "--baseline", str(baseline))
    assert res.exit_code == 1
    assert "baseline: 1 new graph break sites > 0 allowed" in res.output and "model.py:30" in res.output
    assert "baseline: 2 more recompiles > 0 allowed" in res.output
    # removing a site passes and says the baseline can be tightened
    data.breaks = data.breaks[:2]
    data.recompiles = []
    rd.save(data, path)
    res = invoke("gate", "--baseline", str(baseline))
    assert res.exit_code == 0 and "2 baseline site(s) no longer occur" in res.output
    baseline.write_text("{}")
    res = CliRunner().invoke(app, ["gate", "--baseline", str(baseline)])
    assert res.exit_code == 2 and "is not a mend gate baseline" in res.output


def _chromium() -> str | None:
    import shutil

    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed (apt-get install -y chromium)")
def test_html_report_renders_in_headless_chromium(project, tmp_path):
    import subprocess

    out = project / "report.html"
    res = invoke("report", "--format", "html", "--no-static", "-o", str(out))
    assert res.exit_code == 0
    page = out.read_text()
    assert "<script" not in page and "http://" not in page.replace("http://www.w3.org", "")  # self-contained
    base = [_chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
            "--disable-component-update", "--disable-sync", "--no-first-run", f"--user-data-dir={tmp_path / 'chrome'}"]
    dom = subprocess.run([*base, "--dump-dom", out.as_uri()], capture_output=True, text=True, timeout=120)
    assert dom.returncode == 0, dom.stderr[-2000:]
    html_dom = dom.stdout
    assert html_dom.count('<tr><td><a href="#site-') == 4  # one row per site
    assert 'id="regions"' in html_dom and "model.py</code> forward" not in html_dom  # region rows are rendered
    assert "model.py:6</code> forward" in html_dom and ">7</td>" in html_dom  # 7 graphs in forward
    assert 'class="hit"><i>8</i>' in html_dom and "if torch.isinf(x).any():" in html_dom  # the source snippet
    assert "whole-frame skips" in html_dom and "k-frame-skip" in html_dom
    shot = tmp_path / "report.png"
    res = subprocess.run([*base, "--window-size=1280,1400", f"--screenshot={shot}", out.as_uri()],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000


def test_report_fix_column_is_what_mend_fix_decided(project):
    """A recorded site's fix column comes from the same decision as ``mend check``'s mark: ``safe*`` (not
    decided yet) before ``mend fix --diff``, then what ``mend fix`` does there."""
    data = rd.load(project / ".mend" / "run.json")
    before = {f.line: f.fix.label for f in findings(data) if f.path == "model.py" and f.kind == "break"}
    assert before == {7: "safe (sometimes)", 8: "safe (sometimes)"}
    safe = invoke("fix", "--diff", "model.py").output
    unsafe = invoke("fix", "--diff", "--unsafe-fixes", "model.py").output
    after = {f.line: f.fix.label for f in findings(data) if f.path == "model.py" and f.kind == "break"}
    for line, label in after.items():
        by_safe, by_unsafe = (next(ln for ln in out.splitlines() if f"model.py:{line}:" in ln) for out in (safe, unsafe))
        want = "safe" if "not fixed" not in by_safe else "unsafe" if "not fixed" not in by_unsafe else "no"
        assert label == want, (by_safe, by_unsafe, label)
    assert after[7] == "safe"
