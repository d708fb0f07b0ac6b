"""The HTML report on many sites (built by ``benchmarks/report_scale.py``, which times it on 1k-8k sites): every
row of the sites table links to its own section, which shows that site and its source line; no two sections
share an id, even for two sites recorded alike."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from benchmarks.report_scale import project
from mend.analyzers.runtime import data as rd
from mend.cli.app import app

ROW = re.compile(r'<tr><td><a href="#site-(\d+)"><code>([^<]*)</code></a></td><td><span class="kind k-([\w-]+)">')
SECTION = re.compile(r'<section class="site" id="site-(\d+)"><header><code>([^<]*)</code>(.*?)</section>', re.S)


def _html(data_file: Path, out: Path) -> str:
    res = CliRunner().invoke(app, ["report", "--data-file", str(data_file), "--format", "html", "--no-static",
                                   "-o", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return out.read_text()


def test_each_row_links_to_the_section_of_its_own_site(tmp_path: Path) -> None:
    page = _html(project(tmp_path, 60, 20), tmp_path / "r.html")
    rows = ROW.findall(page)
    assert len(rows) == 63  # 60 breaks and a recompile in each of the 3 files
    assert [int(i) for i, _, _ in rows] == list(range(63))
    sections = {int(i): (where, body) for i, where, body in SECTION.findall(page)}
    assert sorted(sections) == list(range(63))  # one section per row, each id once
    for i, where, kind in rows:
        assert sections[int(i)][0] == where, (i, where)
        assert f'class="kind k-{kind}"' in sections[int(i)][1]
    # the break at pkg/module_1.py's fourth function: its own source line, highlighted, in its section
    i = next(int(i) for i, where, _ in rows if where == "pkg/module_1.py:28")
    assert '<span class="hit"><i>28</i>    if y.sum() &gt; 0: y = y - 1</span>' in sections[i][1]
    assert "in <code>step_3</code>" in sections[i][1]


def test_two_sites_recorded_alike_get_two_sections(tmp_path: Path) -> None:
    (tmp_path / "m.py").write_text("import torch\n\n\ndef f(x):\n    print(x)\n    return x\n")
    site = rd.BreakSite("m.py", 5, "f", "Failed to trace builtin operator", "GB0059", "print", source_line="print(x)")
    data = rd.RunData(root=str(tmp_path), runs=[rd.RunInfo(argv=["m.py"], exit_code=0)],
                      breaks=[site, rd.BreakSite(**vars(site))])
    rd.save(data, tmp_path / "run.json")
    page = _html(tmp_path / "run.json", tmp_path / "r.html")
    assert [i for i, _, _ in ROW.findall(page)] == ["0", "1"]
    assert [i for i, _, _ in SECTION.findall(page)] == ["0", "1"]
