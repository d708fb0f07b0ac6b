"""The pytest plugin (`pytest --mend`, budgets, the mend marker), tested with pytester."""

from __future__ import annotations

import json

import pytest

pytest_plugins = ["pytester"]

TESTS = """
import pytest
import torch

def f(x):
    y = x.sin()
    print("debug")
    return y.cos()

def g(x, n):
    return x * n

def test_breaks():
    torch.compile(f, backend="eager")(torch.ones(2))

def test_recompiles():
    c = torch.compile(g, backend="eager")
    for n in (2, 3):
        c(torch.ones(2), n)

def test_clean():
    torch.compile(lambda x: x.sin() + 1, backend="eager")(torch.ones(2))
"""


def _run(pytester, *args):
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:logging", *args)


@pytest.mark.slow
def test_mend_option_records_with_per_test_attribution(pytester):
    pytester.makepyfile(test_model=TESTS)
    result = _run(pytester, "--mend")
    result.assert_outcomes(passed=3)
    data = json.loads((pytester.path / ".mend" / "run.json").read_text())
    (site,) = data["breaks"]
    assert site["path"] == "test_model.py" and site["line"] == 6 and site["registry_id"] == "GB0059"
    assert site["tests"] == ["test_model.py::test_breaks"]
    (rec,) = data["recompiles"]
    assert rec["tests"] == ["test_model.py::test_recompiles"] and rec["kind"] == "value"
    assert data["tests"]["test_model.py::test_breaks"]["breaks"] == 1
    assert data["tests"]["test_model.py::test_recompiles"]["recompiles"] == 1
    assert data["runs"][0]["kind"] == "pytest"
    result.stdout.fnmatch_lines(["*mend*", "*recorded 1 graph break site(s)*"])


@pytest.mark.slow
def test_session_budgets_fail_the_session(pytester):
    pytester.makepyfile(test_model=TESTS)
    result = _run(pytester, "--mend", "--mend-max-breaks", "0", "--mend-data-file", "out.json")
    assert result.ret == 1
    result.assert_outcomes(passed=3)  # the tests pass; the session fails on the budget
    result.stdout.fnmatch_lines(["*mend budget exceeded*", "*1 graph break site(s) > --mend-max-breaks=0*"])
    assert (pytester.path / "out.json").is_file()
    result = _run(pytester, "--mend", "--mend-max-breaks", "1", "--mend-max-recompiles", "1")
    assert result.ret == 0
    result = _run(pytester, "--mend-max-recompiles", "0")
    assert result.ret == 1


@pytest.mark.slow
def test_marker_sets_a_per_test_budget(pytester):
    pytester.makepyfile(
        test_marked=TESTS.replace("def test_breaks", "@pytest.mark.mend(max_breaks=0)\ndef test_breaks")
        .replace("def test_recompiles", "@pytest.mark.mend(max_recompiles=0)\ndef test_recompiles")
        .replace("def test_clean", "@pytest.mark.mend(max_breaks=0, max_recompiles=0)\ndef test_clean")
    )
    for extra in ((), ("--mend",)):
        result = _run(pytester, *extra)
        result.assert_outcomes(passed=1, failed=2)
        result.stdout.fnmatch_lines(
            [
                "*_ test_breaks _*",
                "mend budget exceeded: 1 graph break site(s) > max_breaks=0",
                "*test_marked.py:6: graph break [[]GB0059[]]*",
                "*_ test_recompiles _*",
                "mend budget exceeded: 1 recompile(s) > max_recompiles=0",
                "*test_marked.py:10: recompile (value) of g: n == 2",
            ]
        )


@pytest.mark.slow
def test_xdist_workers_merge_into_one_file(pytester):
    pytest.importorskip("xdist")
    pytester.makepyfile(test_model=TESTS)
    result = _run(pytester, "--mend", "-n", "2")
    result.assert_outcomes(passed=3)
    data = json.loads((pytester.path / ".mend" / "run.json").read_text())
    assert [b["line"] for b in data["breaks"]] == [6] and data["summary"]["recompiles"] == 1
    assert sorted(data["tests"]) == ["test_model.py::test_breaks", "test_model.py::test_clean", "test_model.py::test_recompiles"]
    assert not list((pytester.path / ".mend").glob("run.json.gw*"))
