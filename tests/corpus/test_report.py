"""The corpus report on a small package: recall and precision per mode, rows worse after a fix, fixability
(check's promise against fix's deed) and the classes of code at the recorded sites."""

from __future__ import annotations

import json
from pathlib import Path

from benchmarks.corpus import report
from benchmarks.zoo import records as R
from mend.rewriter.strategies.layerdrop_guard import EXAMPLES

MODEL = '''import torch


class Net(torch.nn.Module):
    def forward(self, x):
        print("step")
        if self.training:
            dropout_probability = torch.rand([])
            if dropout_probability < 0.1:
                return x
        return x * 2
'''


def _brk(line: int, cls: str, text: str) -> R.Break:
    return R.Break(path="net.py", line=line, function="forward", gb_type="x", registry_id=None, reason="",
                   reason_class=cls, source_line=text)


def _results(root: Path) -> R.Results:
    lines = {"net.py": [[5, 11]]}
    printed = _brk(6, "side effects", 'print("step")')
    drop = _brk(9, "data-dependent branching", "if dropout_probability < 0.1:")

    def rec(source, mode, breaks, graphs, **kw):
        return R.Record(name="net", model_type="net", variant="", source=source, mode=mode, breaks=breaks,
                        graphs=graphs, lines=lines, **kw)

    return R.Results(records=[
        rec("original", "eval", [printed], 2), rec("safe", "eval", [], 1, eager_same=True),
        rec("unsafe", "eval", [], 1, eager_same=True),
        rec("original", "train", [printed, drop], 3), rec("safe", "train", [drop], 2, eager_same=True),
        rec("unsafe", "train", [drop, _brk(11, "other", "return x * 2")], 4, eager_same=True),
    ], sources={"original": R.SourceInfo(name="original", path=str(root))},
        settings={"suite": "torchvision", "dtype": "fp32"})


def test_report_scores_each_mode_lists_worse_rows_and_compares_promises_with_fixes(tmp_path):
    (tmp_path / "net.py").write_text(MODEL)
    results = _results(tmp_path)
    rep = report.build(results)
    ev, tr = rep["modes"]["eval"]["all"], rep["modes"]["train"]["all"]
    # the random branch is reported "(only when self.training)": judged on the training rows only
    assert (ev["recorded_sites"], ev["sites_found"], ev["judged_findings"], ev["precision"]) == (1, 1, 1, 1.0)
    assert (tr["recorded_sites"], tr["sites_found"], tr["recall"], tr["judged_findings"]) == (2, 2, 1.0, 2)
    assert tr["breaks"] == {"original": 2, "safe": 1, "unsafe": 2} and tr["removed_by_unsafe"] == 0.0
    assert ev["worse"] == [] and len(tr["worse"]) == 1 and tr["worse"][0].startswith("unsafe: net")
    table = {tuple(r[:4]): r[4] for r in rep["fixability"]["table"]}
    assert sum(table.values()) >= 2  # the print and the random branch, each with what fix did
    # the print: undecided when cold, [*] once mend fix decided, applied by both runs
    assert table.get(("[?]", "[*]", "applied (safe)", "applied (safe)")) == 1
    assert rep["fixability"]["mismatches"] == []
    classes = rep["classes"]
    assert classes["LayerDrop / random layer or path skip"]["train_only"] == 1
    assert classes["logging, print, warnings"]["sites"] == 1
    text = report.render(rep, results)
    assert "break sites original -> safe -> unsafe" in text and "net" in text


def test_code_classes_follow_the_line():
    def cls(text, reason="other"):
        return report.code_class(_brk(1, reason, text))

    assert cls("x[mask] += w") == "boolean-mask store or update (x[mask] = v, x[mask] += v)"
    assert cls("keep = torch.ops.torchvision.nms(boxes, scores, 0.5)").startswith("detection post-processing")
    assert cls("tokens = pad_sequence(seqs)").startswith("unique / nonzero")
    assert cls("out = [layer(x) for x in xs if x.sum() > 0]") == "comprehension or filter over tensors"
    assert cls("if dropout_probability < self.layerdrop:").startswith("LayerDrop")
    assert cls("n = int(lengths.max())") == "tensor used as a Python number (.item(), int(), tolist)"


def test_a_result_cut_short_is_reported_with_root_on_the_files_its_rows_traced(tmp_path, capsys):
    # a --json PATH.partial (the run stopped before the repaired sources) records no sources, and a result made
    # on another machine names a folder that is not here: --root says where the original source is
    (tmp_path / "net.py").write_text(MODEL)
    (tmp_path / "unused.py").write_text("import torch\n\n\ndef f(x):\n    print(x)\n    return x\n")
    results = _results(tmp_path)
    results.records = [r for r in results.records if r.source == "original"]
    for r in results.records:
        r.traced = [["net.py", 5, 11, "forward"]]
    results.sources = {}
    saved = tmp_path / "cut.json.partial"
    R.save(results, saved)
    assert report.main([str(saved)]) == 2
    assert "no original source" in capsys.readouterr().err
    assert report.main([str(saved), "--root", str(tmp_path / "nowhere")]) == 2
    capsys.readouterr()
    assert report.main([str(saved), "--root", str(tmp_path), "--json", str(tmp_path / "rep.json")]) == 0
    rep = json.loads((tmp_path / "rep.json").read_text())
    assert rep["root"] == str(tmp_path.resolve())
    assert rep["modes"]["train"]["all"]["recall"] == 1.0
    assert rep["modes"]["eval"]["all"]["breaks"] == {"original": 1}
    # checked on the traced file only: the print in unused.py is no finding
    assert report._scope(results, tmp_path) == [tmp_path / "net.py"]  # noqa: SLF001
    assert not any(f.startswith("unused.py") for f in rep["modes"]["eval"]["all"]["unconfirmed"])


def test_a_mark_that_promises_what_fix_did_not_do_disagrees():
    assert report.agrees("[*]", "applied (safe)", "applied (safe)")
    assert report.agrees("hidden", "declined: unsafe fix available", "gone (another repair)")
    assert report.agrees("none", "declined: no fix", "gone (another repair)")
    assert not report.agrees("[*]", "declined: x", "applied (unsafe)")
    assert not report.agrees("hidden", "declined: x", "declined: y")
    assert not report.agrees("declined", "declined: x", "applied (unsafe)")
    assert not report.agrees("[?]", "applied (safe)", "applied (safe)")  # still undecided


def test_results_load_gzipped(tmp_path):
    import gzip

    results = _results(tmp_path)
    path = tmp_path / "r.json.gz"
    R.save(results, tmp_path / "r.json")
    path.write_bytes(gzip.compress((tmp_path / "r.json").read_bytes()))
    assert [r.name for r in R.load(path).records] == [r.name for r in results.records]


def test_a_repair_whose_site_still_breaks_after_it_is_listed(tmp_path):
    (tmp_path / "net.py").write_text(MODEL)
    runs = report.fix_runs([tmp_path / "net.py"])
    fixed = runs["safe"].files[0].fixed
    printed = _brk(6, "side effects", 'print("step")')

    def results(after: list) -> R.Results:
        def rec(source, breaks):
            return R.Record(name="net", model_type="net", variant="", source=source, mode="eval", breaks=breaks,
                            graphs=1 + len(breaks), lines={"net.py": [[5, 11]]})
        return R.Results(records=[rec("original", [printed]), rec("safe", after)],
                         sources={"original": R.SourceInfo(name="original", path=str(tmp_path))},
                         settings={"suite": "torchvision", "dtype": "fp32"})

    line = next(i for i, text in enumerate(fixed.splitlines(), 1) if "_mend_emit(__name__" in text)
    still = _brk(line, "side effects", fixed.splitlines()[line - 1])
    assert report.kept_breaks(results([still]), runs, tmp_path) == (["safe eval: net.py:6 MND101 (emit_call)"], [])
    assert report.kept_breaks(results([]), runs, tmp_path) == ([], [])
    # a break elsewhere in the repaired file is not this repair's
    other = _brk(len(fixed.splitlines()), "other", "return x * 2")
    assert report.kept_breaks(results([other]), runs, tmp_path) == ([], [])


# the guard strategy's own example: a LayerDrop loop the safe fix guards
LAYERDROP = EXAMPLES[0].before


def test_a_guard_whose_break_stays_where_its_configuration_keeps_it_is_listed_apart(tmp_path):
    # the safe LayerDrop guard leaves the test's break in training where p > 0, and says so: not a failed repair
    (tmp_path / "net.py").write_text(LAYERDROP)
    test = next(i for i, text in enumerate(LAYERDROP.splitlines(), 1) if "dropout_probability < self.layerdrop" in text)
    runs = report.fix_runs([tmp_path / "net.py"])
    fixed = runs["safe"].files[0].fixed.splitlines()
    line = next(i for i, text in enumerate(fixed, 1) if "self.layerdrop > 0 and" in text)

    def rec(source, line_, text):
        return R.Record(name="net", model_type="net", variant="", source=source, mode="train",
                        breaks=[_brk(line_, "data-dependent branching", text)], graphs=2,
                        lines={"net.py": [[1, len(LAYERDROP.splitlines())]]})
    results = R.Results(records=[rec("original", test, "if dropout_probability < self.layerdrop:"),
                                 rec("safe", line, fixed[line - 1])],
                        sources={"original": R.SourceInfo(name="original", path=str(tmp_path))},
                        settings={"suite": "torchvision", "dtype": "fp32"})
    failed, by_design = report.kept_breaks(results, runs, tmp_path)
    assert failed == []
    assert by_design == [f"safe train: net.py:{test} MND201 (layerdrop_guard): stays in training where the "
                         "probability is above 0"]


def test_a_library_corpus_reports_its_held_out_third_apart_and_hides_its_sites(tmp_path, monkeypatch):
    from benchmarks.zoo import suites

    (tmp_path / "net.py").write_text(MODEL)
    base = _results(tmp_path)
    # the same row under a second name, held out: its sites count in the held-out figures only
    twins = [R.Record(**{**vars(r), "name": "other"}) for r in base.records]
    results = R.Results(records=base.records + twins, sources=base.sources,
                        settings={"suite": "timm", "dtype": "fp32"})
    held_file = tmp_path / "held_out.json"
    held_file.write_text(json.dumps({"timm": ["other"]}))
    monkeypatch.setattr(suites, "HELD_OUT_FILE", held_file)
    rep = report.build(results)
    parts = rep["modes"]["train"]
    assert set(parts) == {"all", "build", "held-out"}
    assert parts["build"]["rows"] == 1 and parts["held-out"]["rows"] == 1 and parts["all"]["rows"] == 2
    assert parts["held-out"]["breaks"] == {"original": 2, "safe": 1, "unsafe": 2}
    assert [r["held_out"] for r in rep["rows"] if r["name"] == "other"] == [True, True]
    # the classes of code count the build row's sites only (each site once, as with one row)
    assert rep["classes"]["logging, print, warnings"]["sites"] == 1
    # a part with nothing recorded and nothing judged shows no figure (not a recall of 1.0)
    quiet = [R.Record(**{**vars(r), "breaks": []}) for r in twins]
    rep_quiet = report.build(R.Results(records=base.records + quiet, sources=base.sources,
                                       settings={"suite": "timm", "dtype": "fp32"}))
    held = rep_quiet["modes"]["eval"]["held-out"]
    assert held["recorded_sites"] == 0 and held["recall"] is None
    recall = next(ln for ln in report.render(rep_quiet, results).splitlines() if ln.startswith("recall"))
    assert recall.split()[1:] == ["1.0", "1.0", "-"]  # all, build, held-out
    rep_all = report.build(R.Results(records=twins, sources=base.sources, settings={"suite": "timm"}))
    assert rep_all["classes"] == {}  # every row held out: nothing to build from


def test_the_held_out_rows_of_timm_and_diffusers_are_the_third_the_hash_rule_picks():
    from benchmarks.zoo import suites

    held = json.loads(suites.HELD_OUT_FILE.read_text())
    assert suites.held_out_rows("timm") == set(held["timm"]) and suites.held_out_rows("torchvision") == set()
    rows = ["a", "b", "c", "d", "e", "f", "g"]
    third = suites.third_by_hash("timm", rows)
    assert len(third) == 2 and third == suites.third_by_hash("timm", list(reversed(rows)))


def test_torch_geometric_holds_out_exactly_the_rows_added_after_building():
    from benchmarks.zoo import libraries, suites

    held = suites.held_out_rows("torch_geometric")
    rows = libraries.rows("torch_geometric")
    assert held == set(libraries.PYG_ADDED) and held <= set(rows)
    assert len(held) * 3 == len(rows)  # a third
