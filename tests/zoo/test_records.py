"""Records, the versioned result file, and the summary table computed from records (no torch)."""

from __future__ import annotations

import json

import pytest

from benchmarks.zoo import records as R
from benchmarks.zoo.table import render, summarize


def _rec(name, source, status=R.OK, breaks=(), **kw):
    return R.Record(name=name, model_type=name.split(":")[0], variant=name.partition(":")[2], source=source,
                    status=status, breaks=[R.Break(path="models/x/modeling_x.py", line=i + 1, function="f",
                                                   gb_type=gb, registry_id=None, reason="", reason_class=cls)
                                           for i, (gb, cls) in enumerate(breaks)], **kw)


ITEM = ("Unsupported Tensor.item() call with capture_scalar_outputs=False", ".item()")
LOG = ("logging.Logger method not supported for non-export cases", "side effects")


def _results():
    return R.Results(records=[
        _rec("a", "original", breaks=[ITEM, LOG], graphs=3, eager_deterministic=True, compiled_matches=True,
             lines={"models/x/modeling_x.py": [[1, 4], [9, 9]]}),
        _rec("a", "safe", breaks=[ITEM], graphs=2, eager_same=True, eager_max_abs_diff=0.0, compiled_matches=True),
        _rec("b", "original", graphs=1, compiled_matches=True),
        _rec("b", "safe", graphs=1, eager_same=False, eager_max_abs_diff=0.5, compiled_matches=True),
        _rec("c", "original", graphs=2, breaks=[ITEM]),
        _rec("c", "safe", status=R.EAGER_ERROR, error="RuntimeError: Sizes of tensors must match"),
        _rec("d", "original", status=R.BUILD_ERROR, error="ValueError: bad config"),
        _rec("d", "safe", status=R.BUILD_ERROR, error="ValueError: bad config"),
    ], versions={"transformers": "4.52.4"}, settings={"dtype": "fp32"})


def test_result_file_round_trips_and_rejects_other_versions(tmp_path):
    path = tmp_path / "zoo.json"
    R.save(_results(), path)
    back = R.load(path)
    assert [r.to_dict() for r in back.records] == [r.to_dict() for r in _results().records]
    data = json.loads(path.read_text())
    assert (data["schema"], data["version"]) == ("mend-zoo", 3)
    assert back.records[0].lines == {"models/x/modeling_x.py": [[1, 4], [9, 9]]} and back.records[1].lines is None
    data["version"] = 99
    path.write_text(json.dumps(data))
    with pytest.raises(R.ResultFileError, match="version 1/2/3"):
        R.load(path)


def test_a_version_1_file_still_loads_with_lines_not_recorded(tmp_path):
    data = _results().to_dict()
    data["version"] = 1
    for rec in data["records"]:
        del rec["lines"]
    path = tmp_path / "old.json"
    path.write_text(json.dumps(data))
    back = R.load(path)
    assert [r.name for r in back.records] == [r.name for r in _results().records]
    assert all(r.lines is None for r in back.records)


def test_summary_counts_breaks_per_class_over_rows_that_ran_in_every_source():
    s = summarize(_results())
    assert s.sources == ["original", "safe"] and s.rows == 4
    assert s.runs == {"original": 3, "safe": 2} and s.common == 2  # a and b
    assert s.breaks == {"original": 2, "safe": 1} and s.breaking == {"original": 1, "safe": 1}
    assert s.by_class[".item()"] == {"original": 1, "safe": 1}
    assert s.by_class["side effects"] == {"original": 1, "safe": 0}


def test_every_changed_eager_output_is_listed_including_rows_that_fail_only_after_the_repair():
    s = summarize(_results())
    changed = {(c.name, c.source): c.what for c in s.changed}
    assert set(changed) == {("b", "safe"), ("c", "safe")}
    assert changed[("b", "safe")].startswith("max |diff| 0.5")
    assert changed[("c", "safe")].startswith("fails now (eager-error)")
    text = render(s)
    assert "safe: c: fails now" in text and "safe: b: max |diff| 0.5" in text
    assert "| reason class | original | safe |" in render(s, markdown=True)


def test_training_rows_are_compared_by_row_and_mode_and_their_messages_and_rng_reported(tmp_path):
    def rec(source, mode, **kw):
        return _rec("a", source, graphs=2, breaks=[ITEM], mode=mode, **kw)

    res = R.Results(records=[
        rec("original", "eval"), rec("safe", "eval", eager_same=True),
        rec("original", "train", backward_graphs=2, rng="x"),
        rec("safe", "train", backward_graphs=2, rng="y", rng_same=False, eager_same=True,
            messages_diff={"compiled": {"reference": 2, "observed": 1, "kept": 1, "lost": 1, "added": 0,
                                        "reordered": 0, "first": ["lost: [log] m WARNING: hi"]}}),
    ], settings={"dtype": "fp32", "suite": "transformers"})
    assert res.modes == ["eval", "train"] and res.by("safe", "train")["a"].rng_same is False
    path = tmp_path / "r.json"
    R.save(res, path)
    again = R.load(path)
    assert again.by("safe", "train")["a"].messages_ok is False and again.by("safe", "eval")["a"].messages_ok is None
    train = summarize(again, "train")
    assert train.backward_graphs == {"original": 2, "safe": 2}
    assert [c.name for c in train.rng_changed] == ["a"] and train.messages["safe"]["compiled"]["lost"] == 1
    assert train.message_failures[0].what.startswith("compiled: lost 1")
    assert summarize(again, "eval").rng_changed == []
    text = render(train)
    assert "random-number state changed vs original" in text and "lost 1, added 0, reordered 0 of 2" in text


def test_a_repaired_row_with_more_breaks_or_graphs_is_listed_as_worse():
    res = R.Results(records=[_rec("a", "original", graphs=2, breaks=[ITEM]),
                             _rec("a", "unsafe", graphs=3, breaks=[ITEM, LOG]),
                             _rec("b", "original", graphs=2, breaks=[ITEM]),
                             _rec("b", "unsafe", graphs=1)])
    worse = summarize(res).worse
    assert [(c.name, c.source) for c in worse] == [("a", "unsafe")] and "1 -> 2" in worse[0].what
