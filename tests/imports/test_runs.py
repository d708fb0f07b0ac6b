"""Line maps and recorded sites moved back to the original lines."""

from __future__ import annotations

from types import SimpleNamespace

from mend.analyzers.runtime.data import BreakSite, RecompileSite, Region, RunData
from mend.imports.cache import AppliedChange, Entry
from mend.imports.runs import attribute
from mend.rewriter.results import line_map


def test_line_map_equal_inserted_and_replaced_lines():
    original = "a\nb\n    print(x)\nc\n"
    repaired = "import torch\na\nb\nif not torch.compiler.is_compiling():\n        print(x)\nc\n"
    assert line_map(original, repaired) == [1, 1, 2, 3, 3, 4]
    assert line_map("a\nb\n", "a\nb\nhelper\n") == [1, 2, 2]
    assert line_map("a\n", "a\n") == [1]


def test_attribute_moves_sites_of_repaired_modules(tmp_path):
    src = tmp_path / "lib.py"
    src.write_text("def f(x):\n    print(x)\n    return x\n")
    entry = Entry(key="k", module="lib", path=str(src), source_sha256="s", status="repaired",
                  text="def f(x):\n    if not c():\n        print(x)\n    return x\n", line_map=[1, 2, 2, 3],
                  applied=[AppliedChange("MND101", 2, 5, "guarded", "safe")])
    other = tmp_path / "user.py"
    hook = SimpleNamespace(loaded={str(src): entry})
    data = RunData(root=str(tmp_path), breaks=[
        BreakSite(path="lib.py", line=3, function="f", gb_type="print", registry_id=None, message="m", count=2,
                  stack=[["lib.py", 3, "f"], ["user.py", 9, "main"]], regions=["lib.py:1:f"]),
        BreakSite(path="lib.py", line=2, function="f", gb_type="print", registry_id=None, message="m", count=1),
        BreakSite(path=str(other), line=3, function="g", gb_type="print", registry_id=None, message="m")],
        recompiles=[RecompileSite(path="lib.py", line=4, function="f", kind="dtype")],
        regions=[Region(id="lib.py:1:f", path="lib.py", line=1, function="f")])
    attribute(data, hook)
    lib = [b for b in data.breaks if b.path == "lib.py"]
    assert [(b.line, b.count, b.source_line) for b in lib] == [(2, 3, "print(x)")]  # two repaired lines, one site
    assert lib[0].stack == [["lib.py", 2, "f"], ["user.py", 9, "main"]]
    assert [(b.path, b.line) for b in data.breaks if b.path != "lib.py"] == [(str(other), 3)]
    assert (data.recompiles[0].line, data.recompiles[0].source_line) == (3, "return x")
    assert data.repaired == [{"module": "lib", "path": "lib.py", "status": "repaired", "remaining": 0, "error": "",
                              "applied": [{"code": "MND101", "line": 2, "col": 5, "message": "guarded",
                                           "applicability": "safe"}]}]
    again = RunData.from_dict(data.to_dict())
    assert again.repaired == data.repaired
