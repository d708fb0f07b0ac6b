"""The repositories suite forgets what one row imported before the next: modules from its folder (a namespace
package too) and the stand-in modules its driver put in ``sys.modules``."""

from __future__ import annotations

import json
import sys

from benchmarks.zoo.repos import ReposSuite

DRIVER = '''import sys, types
import torch


def build(repo, mode):
    import util.misc as misc
    import util.sub.deep  # noqa: F401
    assert misc.WHO == {who!r}, misc.__file__
    {extra}
    return {{"model": torch.nn.Linear(2, 2), "args": (torch.ones(1, 2),)}}
'''


def test_a_row_sees_neither_the_namespace_package_nor_the_stand_ins_of_the_row_before(tmp_path, monkeypatch):
    checkouts, drivers = tmp_path / "checkouts", tmp_path / "drivers"
    drivers.mkdir()
    repos = []
    for name, extra in (("a", 'sys.modules["fake_tf"] = types.ModuleType("fake_tf")'),
                        ("b", 'assert "fake_tf" not in sys.modules')):
        # util/ and util/sub/ without __init__.py: namespace packages (the child's path is read from its parent)
        (checkouts / name / "util" / "sub").mkdir(parents=True)
        (checkouts / name / "util" / "misc.py").write_text(f"WHO = {name!r}\n")
        (checkouts / name / "util" / "sub" / "deep.py").write_text("X = 1\n")
        (drivers / f"{name}.py").write_text(DRIVER.format(who=name, extra=extra))
        repos.append({"name": name, "repo": f"x/{name}", "commit": "0", "dir": name, "files": ["util/misc.py"],
                      "driver": f"drivers/{name}.py", "held_out": False})
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"repos": repos}))
    monkeypatch.setenv("MEND_CORPUS_MANIFEST", str(manifest))
    before = set(sys.modules)
    suite = ReposSuite(str(checkouts))
    try:
        for row in ("a", "b", "a"):
            case = suite.case(row, "eval", "fp32", "tiny")
            assert case.model_class == "Linear"
        suite._forget()  # noqa: SLF001
        assert not {"fake_tf", "util", "util.sub", "util.sub.deep"} & set(sys.modules)
    finally:
        for name in set(sys.modules) - before:
            if name in ("fake_tf", "util", "util.misc", "util.sub", "util.sub.deep"):
                del sys.modules[name]


NUMPY_DRIVER = '''import random
import numpy as np
import torch


def build(repo, mode):
    lin = torch.nn.Linear(2, 2)
    with torch.no_grad():  # weights drawn as DLRM draws its embedding tables: numpy's and Python's generators
        lin.weight.copy_(torch.from_numpy(np.random.uniform(-1, 1, (2, 2))) * random.random())
    return {"model": lin, "args": (torch.ones(1, 2),)}
'''


def test_a_model_built_from_numpy_and_python_draws_is_the_same_in_every_worker(tmp_path, monkeypatch):
    """Each source runs in its own worker: a row's build sees the same seeds whatever ran before it there."""
    import random

    import numpy as np

    checkouts, drivers = tmp_path / "checkouts", tmp_path / "drivers"
    (checkouts / "n").mkdir(parents=True)
    drivers.mkdir()
    (drivers / "n.py").write_text(NUMPY_DRIVER)
    manifest = tmp_path / "manifest.json"
    manifest.write_text(json.dumps({"repos": [{"name": "n", "repo": "x/n", "commit": "0", "dir": "n", "files": [],
                                               "driver": "drivers/n.py", "held_out": False}]}))
    monkeypatch.setenv("MEND_CORPUS_MANIFEST", str(manifest))
    suite = ReposSuite(str(checkouts))
    weights = []
    for state in (1, 2):  # another row drew from the generators before this one
        np.random.seed(state)
        random.seed(state)
        np.random.uniform(size=state)
        weights.append(suite.case("n", "eval", "fp32", "tiny").model.weight.detach().clone())
    suite._forget()  # noqa: SLF001
    assert weights[0].equal(weights[1])
