"""`mend check` over the whole installed `transformers` package: no crash, valid SARIF, sane findings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mend.analyzers.static import Config, check_paths
from mend.analyzers.static.output import sarif
from mend.analyzers.static.rules import RULES

HERE = Path(__file__).resolve().parent


@pytest.mark.slow
def test_check_whole_transformers_package(tmp_path):
    transformers = pytest.importorskip("transformers")
    root = Path(transformers.__file__).parent
    cfg = Config().with_overrides(cache_dir=tmp_path / "cache")
    result = check_paths([root], cfg, jobs=2)
    assert len(result.files) > 1000
    assert result.lines > 500_000
    codes = {d.code for d in result.diagnostics}
    assert codes <= set(RULES)
    # transformers is valid, UTF-8 Python: no file-level errors
    assert not [d for d in result.diagnostics if d.code in ("MND901", "MND902")]
    # model code does break graphs in places (logger calls, validation guards, .item())
    assert {"MND102", "MND201", "MND301"} <= codes
    for d in result.diagnostics:
        assert d.line >= 1 and d.col >= 1 and Path(root, Path(d.path).name).suffix == ".py"
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((HERE / "sarif-schema-2.1.0.json").read_text())
    jsonschema.Draft4Validator(schema).validate(json.loads(sarif(result.diagnostics)))
    # a warm run over the unchanged package reuses every cached file and reports the same
    again = check_paths([root], cfg, jobs=2)
    assert again.analyzed == 0
    assert len(again.diagnostics) == len(result.diagnostics)
