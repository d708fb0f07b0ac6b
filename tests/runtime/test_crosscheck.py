"""The cross-check's scoring (fast, with a stand-in static analyzer) and one real run (slow)."""

from __future__ import annotations

from pathlib import Path

import pytest

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.runtime import crosscheck as cc
from mend.analyzers.runtime.data import BreakSite
from mend.analyzers.runtime.recorder import ProjectFilter


class FakeRecorder:
    def __init__(self, root: Path, breaks, traced, lines):
        self.filter = ProjectFilter(root=root)
        self.breaks = breaks
        self.traced = traced
        self.lines = lines
        self.graphs = 3


def test_scoring_counts_only_traced_lines(tmp_path, monkeypatch):
    model = tmp_path / "model.py"
    model.write_text("\n" * 40)
    m = str(model)
    rec = FakeRecorder(
        tmp_path,
        breaks=[BreakSite("model.py", 10, "forward", "t", "GB0059", "m"), BreakSite("model.py", 20, "forward", "t", "GB0170", "m")],
        traced={(m, 5, 30, "forward")},
        lines={(m, 10), (m, 12), (m, 20), (m, 25)},
    )
    found = [
        Diagnostic("MND101", "print", m, 10, 1),  # confirmed
        Diagnostic("MND201", "if", m, 25, 1),  # traced line, no break: a false positive
        Diagnostic("MND102", "log", m, 28, 1),  # never traced (branch not taken): not judged
        Diagnostic("MND401", "recompile rule", m, 12, 1),  # recompile rules predict no break
    ]
    monkeypatch.setattr(cc, "_static_findings", lambda files, folders: found)
    result = cc.score("fake", rec, [])
    assert result.true_positive_sites == 1 and result.missed == [(m, 20, "GB0170")]
    assert result.true_positive_findings == 1 and result.false_findings == [(m, 25, "MND201")]
    total = cc.CrosscheckResult([result])
    assert total.recall == 0.5 and total.precision == 0.5
    assert '"recall": 0.5' in total.to_json()


def test_unknown_model_is_an_error():
    with pytest.raises(cc.CrosscheckError, match="unknown model"):
        cc.run(["tf:nope"])


@pytest.mark.slow
def test_crosscheck_on_an_example_records_its_known_breaks():
    result = cc.run(["examples:transformer_block"])
    (model,) = result.models
    assert model.error is None
    assert [(Path(p).name, line, gb) for p, line, gb in model.recorded] == [
        ("transformer_block.py", 44, "GB0291"),
        ("transformer_block.py", 47, "GB0170"),
    ]
    assert model.graphs == 3
    assert 0.0 <= result.precision <= 1.0 and 0.0 <= result.recall <= 1.0
