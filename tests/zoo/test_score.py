"""`python -m benchmarks.zoo.score`: scoring `mend check` against a zoo result file, on small synthetic records."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from benchmarks.zoo import records as R
from benchmarks.zoo import score as zs

REPO = Path(__file__).resolve().parents[2]


def _score(*args: str | Path) -> subprocess.CompletedProcess:
    """The scorer as a user runs it: ``python -m benchmarks.zoo.score`` from the repository root."""
    return subprocess.run([sys.executable, "-m", "benchmarks.zoo.score", *map(str, args)], cwd=REPO,
                          capture_output=True, text=True, timeout=300)


def _record(name: str, breaks: list[R.Break], traced: list[list], status: str = R.OK) -> R.Record:
    return R.Record(name=name, model_type=name, variant="", source="original", status=status, breaks=breaks,
                    traced=traced)


def _brk(path: str, line: int, cls: str = "data-dependent branching", skip: bool = False) -> R.Break:
    return R.Break(path=path, line=line, function="forward", gb_type="Data-dependent branching",
                   registry_id="GB0170", reason="", reason_class=cls, frame_skip=skip)


RECORDS = [
    _record("a", [_brk("m/a.py", 10), _brk("m/a.py", 30, ".item()"), _brk("/abs/torch/x.py", 5)],
            [["m/a.py", 5, 40, "forward"]]),
    # a second row hitting the same site: one site, two models
    _record("b", [_brk("m/a.py", 10)], [["m/a.py", 5, 40, "forward"], ["m/b.py", 1, 9, "helper"]]),
    # a row that did not run: its records do not count
    _record("c", [_brk("m/c.py", 3)], [["m/c.py", 1, 9, "forward"]], status=R.BUILD_ERROR),
]


def test_score_counts_sites_judged_and_confirmed_findings():
    findings = [
        zs.StaticFinding("m/a.py", 9, 11, "MND201"),  # span holds the site at line 10: confirmed
        zs.StaticFinding("m/a.py", 20, 20, "MND102"),  # traced, no break there: judged, not confirmed
        zs.StaticFinding("m/a.py", 50, 50, "MND201"),  # outside every traced function: not judged
        zs.StaticFinding("m/b.py", 4, 4, "MND102", mode="self.training"),  # a mode no row runs: not judged
        zs.StaticFinding("m/a.py", 30, 30, "MND401"),  # a recompile rule: left out
        zs.StaticFinding("m/b.py", 2, 2, "MND506", inner_line=6),  # frame skip predicting line 6: judged
    ]
    s = zs.score(RECORDS, findings)
    assert [(x.path, x.line) for x in s.sites] == [("m/a.py", 10), ("m/a.py", 30)]
    assert s.sites[0].models == ["a", "b"]
    assert [(f.line, f.code) for f in s.judged] == [(9, "MND201"), (20, "MND102"), (2, "MND506")]
    assert [(f.line, f.code) for f in s.confirmed] == [(9, "MND201")]
    assert [(x.path, x.line) for x in s.missed] == [("m/a.py", 30)]
    assert s.recall == 0.5
    assert abs(s.precision - 1 / 3) < 1e-9
    assert s.by_reason() == [(".item()", 1, 0), ("data-dependent branching", 1, 1)]
    rules = {r[0]: r[1:] for r in s.by_rule()}
    assert rules["MND201"] == (2, 1, 1, 1)
    assert rules["MND102"] == (2, 1, 0, 0)
    assert "MND401" not in rules


def test_tolerance_widens_the_span_and_inner_line():
    findings = [zs.StaticFinding("m/a.py", 12, 12, "MND201"), zs.StaticFinding("m/a.py", 25, 25, "MND505",
                                                                                  inner_line=29)]
    assert zs.score(RECORDS, findings).recall == 0.0
    wide = zs.score(RECORDS, findings, tolerance=2)
    assert wide.recall == 1.0 and [f.line for f in wide.confirmed] == [12, 25]
    one = zs.score(RECORDS, findings, tolerance=1)  # 12 - 1 misses line 10; the inner line 29 + 1 holds 30
    assert [(s.line, f.line) for s, f in zip(one.found, one.confirmed)] == [(30, 25)]


def test_traced_index_merges_ranges():
    idx = zs.TracedIndex(RECORDS)
    assert idx.contains("m/a.py", 5) and idx.contains("m/a.py", 40) and not idx.contains("m/a.py", 41)
    assert idx.contains("m/a.py", 41, 60) is False and idx.contains("m/a.py", 1, 5)
    assert not idx.contains("/abs/torch/x.py", 5)
    # the row that did not run counts neither for sites nor for traced code
    assert not zs.score(RECORDS, [zs.StaticFinding("m/c.py", 3, 3, "MND201")]).judged


def _package(tmp_path: Path) -> Path:
    pkg = tmp_path / "pkg"
    (pkg / "m").mkdir(parents=True)
    (pkg / "__init__.py").write_text('__version__ = "1.0"\n')
    (pkg / "m" / "__init__.py").write_text("")
    (pkg / "m" / "a.py").write_text(
        "import torch\nfrom torch import nn\n\n\nclass A(nn.Module):\n"
        "    def forward(self, x):\n"
        "        n = x.sum()\n"
        "        if n > 0:\n"               # line 8: MND201
        "            x = x * 2\n"
        "        return torch.arange(x.max()) + x.shape[0]\n"  # line 10: MND310 (computed after the break)
    )
    return pkg


def _results(tmp_path: Path, breaks: list[R.Break], version: str = "1.0") -> Path:
    res = R.Results(records=[_record("a", breaks, [["m/a.py", 6, 10, "forward"]])],
                    versions={"transformers": version})
    out = tmp_path / "zoo.json"
    R.save(res, out)
    return out


def test_cli_scores_a_package_against_a_result_file(tmp_path):
    pkg = _package(tmp_path)
    results = _results(tmp_path, [_brk("m/a.py", 8), _brk("m/a.py", 10, "data-dependent operator")])
    got = _score(results, "--package", pkg, "-j", "1", "--format", "json")
    assert got.returncode == 0, got.stderr
    data = json.loads(got.stdout)
    assert (data["recorded_sites"], data["sites_found"], data["judged_findings"]) == (2, 2, 2)
    assert data["precision"] == 1.0 and data["recall"] == 1.0
    assert {r["code"] for r in data["by_rule"]} == {"MND201", "MND310"}
    table = _score(results, "--package", pkg, "-j", "1")
    assert table.returncode == 0, table.stderr
    assert "| MND310 | 1 | 1 | 1 | 1.00 | 1 |" in table.stdout
    assert "precision 1.000 (2/2), recall 1.000 (2/2)" in table.stdout


def test_cli_refuses_a_package_of_another_version(tmp_path):
    pkg = _package(tmp_path)
    results = _results(tmp_path, [_brk("m/a.py", 8)], version="2.0")
    got = _score(results, "--package", pkg)
    assert got.returncode == 2
    assert "line numbers would not match" in got.stderr and not got.stdout


def test_cli_reports_an_unreadable_result_file(tmp_path):
    bad = tmp_path / "zoo.json"
    bad.write_text("{}")
    got = _score(bad, "--package", _package(tmp_path))
    assert got.returncode == 2
    assert "not a mend-zoo result" in got.stderr


def test_with_recorded_lines_a_finding_is_judged_only_where_its_lines_ran():
    rec = _record("a", [_brk("m/a.py", 10)], [["m/a.py", 5, 40, "forward"]])
    rec.lines = {"m/a.py": [[5, 12], [20, 20]]}
    findings = [
        zs.StaticFinding("m/a.py", 10, 10, "MND201"),  # ran, a break: confirmed
        zs.StaticFinding("m/a.py", 20, 20, "MND102"),  # ran, no break: judged, not confirmed
        zs.StaticFinding("m/a.py", 25, 25, "MND102"),  # in the traced function, but the line never ran
        zs.StaticFinding("m/a.py", 18, 21, "MND310"),  # a multi-line span: one of its lines ran
        zs.StaticFinding("m/a.py", 30, 30, "MND506", inner_line=20),  # frame skip: judged on the inner line
        zs.StaticFinding("m/a.py", 11, 11, "MND506", inner_line=33),  # header ran, inner break never did
    ]
    s = zs.score([rec], findings)
    assert [(f.line, f.code) for f in s.judged] == [(10, "MND201"), (18, "MND310"), (20, "MND102"),
                                                    (30, "MND506")]
    assert [(f.line, f.code) for f in s.not_judged] == [(11, "MND506"), (25, "MND102")]
    assert s.rows_with_lines == 1 and s.precision == 0.25
    text = zs.render(s)
    assert "not judged (2 finding(s), not counted): 2 on lines no row ran" in text
    assert "  m/a.py:25 MND102" in text and "the lines each row's eager forward ran" in text
    # a record without lines (a version-1 file) falls back to the functions Dynamo traced
    old = _record("b", [], [["m/b.py", 1, 9, "helper"]])
    mixed = zs.score([rec, old], [zs.StaticFinding("m/b.py", 4, 4, "MND102"), findings[2]])
    assert [f.path for f in mixed.judged] == ["m/b.py"] and mixed.rows_with_lines == 1
    assert "executed lines for 1 rows, the functions Dynamo traced for the other 1" in zs.render(mixed)


def test_lines_after_an_unresumed_frame_skip_are_not_judged_on_that_row():
    skip = _brk("m/a.py", 12, skip=True)
    rec = _record("a", [skip], [["m/a.py", 5, 40, "forward"]])
    rec.lines = {"m/a.py": [[5, 30]]}
    findings = [
        zs.StaticFinding("m/a.py", 8, 8, "MND102"),  # before the skip: traced, no break there
        zs.StaticFinding("m/a.py", 12, 12, "MND201"),  # the skip itself: confirmed
        zs.StaticFinding("m/a.py", 20, 20, "MND310"),  # after it: the rest of the call ran eagerly
    ]
    s = zs.score([rec], findings)
    assert [f.line for f in s.judged] == [8, 12] and [f.line for f in s.not_judged] == [20]
    # Dynamo resumed after the skip line (a resume function of that line was traced): judged again
    rec.traced.append(["m/a.py", 12, 40, "torch_dynamo_resume_in_forward_at_12"])
    assert [f.line for f in zs.score([rec], findings).judged] == [8, 12, 20]
    # another row ran line 20 without the skip: judged
    plain = _record("b", [], [["m/a.py", 5, 40, "forward"]])
    plain.lines = {"m/a.py": [[20, 20]]}
    rec.traced.pop()
    assert [f.line for f in zs.score([rec, plain], findings).judged] == [8, 12, 20]


def test_a_dtype_test_for_another_dtype_is_not_judged():
    rec = _record("a", [], [["m/a.py", 5, 40, "forward"]])
    fp16 = zs.StaticFinding("m/a.py", 8, 8, "MND201", mode="h.dtype == torch.float16")
    fp32 = zs.StaticFinding("m/a.py", 9, 9, "MND201", mode="torch.float32 == h.dtype")
    assert zs.score([rec], [fp16, fp32]).judged == [fp32]
    assert zs.score([rec], [fp16, fp32], dtype="fp16").judged == [fp16]
    assert "dtype tests: it runs fp32" in zs.render(zs.score([rec], [fp16]))


def test_a_frame_skip_through_a_call_confirms_the_skip_recorded_at_the_callee_break():
    rec = _record("a", [_brk("m/b.py", 7, skip=True), _brk("m/a.py", 3)],
                  [["m/a.py", 1, 40, "forward"], ["m/b.py", 5, 9, "forward"]])
    through = zs.StaticFinding("m/a.py", 20, 20, "MND506", inner_line=21, break_path="m/b.py", break_line=7)
    wrong = zs.StaticFinding("m/a.py", 30, 30, "MND506", inner_line=31, break_path="m/a.py", break_line=3)
    s = zs.score([rec], [through, wrong])
    assert s.confirmed == [through]  # the site at m/a.py:3 broke without skipping the frame
    assert [(x.path, x.line) for x in s.found] == [("m/b.py", 7)]


def test_a_frame_skip_through_a_call_is_judged_where_the_call_and_the_callee_break_ran_on_one_row():
    """The callee breaks only on some path (a deprecation warning behind an argument): where no row ran the
    call and the callee's break line together, nothing predicted was tested."""
    warns = _record("warns", [_brk("m/w.py", 9)], [["m/w.py", 5, 12, "deprecate"], ["m/c.py", 1, 9, "forward"]])
    warns.lines = {"m/w.py": [[5, 12]], "m/c.py": [[1, 9]]}
    loops = _record("loops", [], [["m/a.py", 1, 40, "forward"], ["m/w.py", 5, 12, "deprecate"]])
    loops.lines = {"m/a.py": [[1, 40]], "m/w.py": [[5, 6]]}  # the call ran, the callee returned before line 9
    skip = zs.StaticFinding("m/a.py", 20, 20, "MND506", inner_line=21, break_path="m/w.py", break_line=9)
    assert zs.score([warns, loops], [skip]).judged == []
    loops.lines["m/w.py"] = [[5, 12]]  # now the callee broke under that call on the same row
    assert zs.score([warns, loops], [skip]).judged == [skip]


def test_the_traced_scope_holds_the_files_a_row_broke_in_without_tracing_any_operation():
    from benchmarks.zoo.runner import traced_files

    rec = _record("a", [_brk("utils/deprecation.py", 98), _brk("/abs/torch/x.py", 5)],
                  [["models/m.py", 1, 40, "forward"]])
    assert traced_files([rec]) == ["models/m.py", "utils/deprecation.py"]


def test_a_row_whose_compiled_run_raised_judges_nothing():
    """Dynamo failed part way at a line the record does not keep: neither the lines eager ran nor the
    functions Dynamo traced were observed under compile to the end."""
    rec = _record("a", [], [["m/a.py", 5, 12, "forward"]], status=R.COMPILE_ERROR)
    rec.lines = {"m/a.py": [[5, 30]]}  # eager ran all of it; the compiled run stopped inside forward
    ok = _record("b", [], [["m/b.py", 1, 9, "forward"]])
    ok.lines = {"m/b.py": [[1, 9]]}
    findings = [zs.StaticFinding("m/a.py", 8, 8, "MND102"), zs.StaticFinding("m/a.py", 20, 20, "MND102"),
                zs.StaticFinding("m/b.py", 4, 4, "MND102")]
    assert [(f.path, f.line) for f in zs.score([rec, ok], findings).judged] == [("m/b.py", 4)]


def test_a_finding_only_when_training_is_judged_on_training_rows_only():
    rec = _record("a", [_brk("m/a.py", 8)], [["m/a.py", 5, 40, "forward"]])
    train_only = zs.StaticFinding("m/a.py", 8, 8, "MND201", mode="self.training")
    eval_only = zs.StaticFinding("m/a.py", 12, 12, "MND201", mode="not self.training")
    plain = zs.StaticFinding("m/a.py", 20, 20, "MND102")
    evaluated = zs.score([rec], [train_only, eval_only, plain])
    assert [f.line for f in evaluated.judged] == [8, 12, 20]  # line 8: it confirms a recorded site anyway
    unseen = _record("b", [], [["m/a.py", 5, 40, "forward"]])
    assert [f.line for f in zs.score([unseen], [train_only, eval_only, plain]).judged] == [12, 20]
    trained = zs.score([unseen], [train_only, eval_only, plain], run_mode="train")
    assert [f.line for f in trained.judged] == [8, 20]
