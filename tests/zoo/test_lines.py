"""The lines of a package that ran (``benchmarks.zoo.lines``): only the package's files, only lines that ran."""

from __future__ import annotations

import importlib
import sys

from benchmarks.zoo.lines import LineRecorder, from_ranges, to_ranges

PKG = '''\
def helper(x, flag):
    if flag:
        x = x + 1
    return x * 2


def unused():
    return 0
'''


def test_ranges_round_trip():
    assert to_ranges({9, 3, 4, 5}) == [[3, 5], [9, 9]]
    assert from_ranges([[3, 5], [9, 9]]) == {3, 4, 5, 9}
    assert to_ranges([]) == []


def test_records_the_package_lines_that_ran_and_nothing_outside(tmp_path, monkeypatch):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "mod.py").write_text(PKG)
    monkeypatch.syspath_prepend(str(tmp_path))
    mod = importlib.import_module("pkg.mod")
    outer = sys.gettrace()
    with LineRecorder(str(pkg)) as rec:
        assert mod.helper(1, False) == 2
        importlib.import_module("json").dumps([1])  # a frame outside the package: not recorded
    assert sys.gettrace() is outer  # the previous trace function is back
    # the def line (call event), the test, the return; not the branch body, not the function never called
    assert rec.ranges() == {"mod.py": [[1, 2], [4, 4]]}
    with LineRecorder(str(pkg)) as rec:
        mod.helper(1, True)
    assert rec.ranges() == {"mod.py": [[1, 4]]}
