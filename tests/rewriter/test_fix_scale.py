"""``mend fix`` at scale: the same bytes with any number of workers, and a cache that never changes a result."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mend.cli.app import app
from mend.rewriter import workers
from mend.rewriter.fix_cache import FixCache
from tests.rewriter.conftest import FIXTURES
from tests.rewriter.test_kept_values import _TABLE_SRC, _table_package

runner = CliRunner()


def _tree(root: Path) -> Path:
    """A package of every fixture input, in two sub-packages (the helper module goes to its top)."""
    for i, src in enumerate(sorted(FIXTURES.glob("*.in.py"))):
        sub = root / "pkg" / ("a" if i % 2 else "b")
        sub.mkdir(parents=True, exist_ok=True)
        (sub / "__init__.py").write_text("")
        (sub / src.name.replace(".in.py", ".py")).write_text(src.read_text())
    (root / "pkg" / "__init__.py").write_text("")
    return root / "pkg"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.py"))}


def _fix(root: Path, *args: str) -> tuple[int, str]:
    res = runner.invoke(app, ["fix", "--isolated", "--unsafe-fixes", *args, str(root)])
    return res.exit_code, res.output.replace(str(root), "ROOT")


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The texts the rewriter repairs in this process (with -j 1, every repair)."""
    calls: list[str] = []
    real = workers.fix_windowed

    def count(source, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(source)
        return real(source, *args, **kwargs)

    monkeypatch.setattr(workers, "fix_windowed", count)
    return calls


def test_workers_write_the_same_bytes_and_say_the_same_as_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    one, two = _tree(tmp_path / "one"), _tree(tmp_path / "two")
    code1, out1 = _fix(one, "-j", "1", "--no-cache")
    code2, out2 = _fix(two, "-j", "2", "--no-cache")
    assert (code2, out2.replace("/two/", "/one/")) == (code1, out1.replace("/two/", "/one/"))
    assert _files(one.parent) and {k.replace("two", "one", 1): v for k, v in _files(two.parent).items()} == \
        {k: v for k, v in _files(one.parent).items()}
    assert "fixed:" in out1 and any(b"_mend" in v for v in _files(one.parent).values())  # it did repair


def test_an_unchanged_tree_is_not_repaired_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                 counted: list[str]) -> None:
    """--diff twice: the second run repairs nothing and says the same; a run with --no-cache agrees."""
    monkeypatch.chdir(tmp_path)
    tree = _tree(tmp_path / "t")
    first = _fix(tree, "--diff", "-j", "1")
    repaired = len(counted)
    assert repaired > 40 and first[0] == 1
    assert _fix(tree, "--diff", "-j", "1") == first
    assert len(counted) == repaired
    assert _fix(tree, "--diff", "-j", "1", "--no-cache") == first
    assert len(counted) == 2 * repaired


def test_a_repaired_tree_is_known_to_stay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                          counted: list[str]) -> None:
    """After a run that writes, the next run on the written files repairs none of those whose last round
    found nothing more to do, and says what a run without the cache says."""
    monkeypatch.chdir(tmp_path)
    tree = _tree(tmp_path / "t")
    _fix(tree, "-j", "1")
    written = _files(tree.parent)
    before = len(counted)
    again = _fix(tree, "-j", "1")
    assert len(counted) - before < 5, counted[before:]  # the few that a round left to the next run
    assert _fix(tree, "-j", "1", "--no-cache")[1] == again[1]
    assert _files(tree.parent) == written  # fixing twice changes nothing


def test_options_and_findings_are_part_of_the_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  counted: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    tree = _tree(tmp_path / "t")
    _fix(tree, "--diff", "-j", "1")
    n = len(counted)
    res = runner.invoke(app, ["fix", "--isolated", "--diff", "-j", "1", str(tree)])  # safe only: new keys
    assert res.exit_code == 1 and len(counted) > n
    m = len(counted)
    target = next(tree.rglob("keep_print.py"))
    target.write_text(target.read_text() + "\n# one more line\n")
    _fix(tree, "--diff", "-j", "1")
    assert counted[m:] == [target.read_text()]  # only the file that changed


def test_a_module_beside_that_changes_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                    counted: list[str]) -> None:
    """The repair of model.py reads the table of functions in rope.py: a change there is seen."""
    monkeypatch.chdir(tmp_path)
    pkg = _table_package(tmp_path, "tbl")
    model = str(pkg / "model.py")
    ok = runner.invoke(app, ["fix", "--isolated", "--unsafe-fixes", "--diff", "-j", "1", model])
    assert "_mend_kept(cache_position" in ok.output
    n = len(counted)
    (pkg / "rope.py").write_text(_TABLE_SRC.format(
        extra="", entry=', "anon": lambda config, device, seq_len=None: (torch.ones(seq_len), 1.0)'))
    declined = runner.invoke(app, ["fix", "--isolated", "--unsafe-fixes", "--diff", "-j", "1", model])
    assert len(counted) == n + 1
    assert "_mend_kept(cache_position" not in declined.output


def test_a_damaged_cache_is_no_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, counted: list[str]) -> None:
    monkeypatch.chdir(tmp_path)
    tree = _tree(tmp_path / "t")
    first = _fix(tree, "--diff", "-j", "1")
    store = FixCache(tmp_path / ".mend_cache").file
    assert store is not None and store.is_file()
    for damage in (b"{not json", b'{"@m": {"k": {"@m": {"diags": 3}}}}', b"[]"):
        store.write_bytes(damage)
        n = len(counted)
        assert _fix(tree, "--diff", "-j", "1") == first
        assert len(counted) > n
    cache = FixCache(tmp_path / ".mend_cache")
    key = next(k for k, v in cache.entries.items() if json.loads(v)["@m"]["result"] is not None)
    entry = json.loads(cache.entries[key])
    entry["@m"]["result"] = {"@m": {"fixed": 7}}  # a wrong field in one entry: that file is repaired again
    cache.entries[key] = json.dumps(entry)
    cache.dirty = True
    cache.save()
    n = len(counted)
    assert _fix(tree, "--diff", "-j", "1") == first
    assert len(counted) == n + 1
