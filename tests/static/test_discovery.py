"""File discovery: exclusions by name and by path from the root, and ``.gitignore`` rules of a repository whose
root lies above the folder given (found once per folder)."""

from __future__ import annotations

import os
from pathlib import Path

from mend.analyzers.static.config import Config
from mend.analyzers.static.discovery import discover_files


def _tree(root: Path) -> None:
    for rel in ("pkg/a.py", "pkg/build/b.py", "pkg/gen/c.py", "pkg/sub/d.py", "pkg/sub/test_e.py", "pkg/sub/f.py",
                "pkg/sub/[x].py", "pkg/.venv/g.py"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("x = 1\n")
    (root / ".git").mkdir()
    (root / ".gitignore").write_text("gen/\n/pkg/sub/f.py\n")


def test_names_paths_and_gitignore_above_the_folder_given(tmp_path: Path, monkeypatch) -> None:
    _tree(tmp_path)
    monkeypatch.chdir(tmp_path / "pkg")
    config = Config(extend_exclude=("test_*.py", "sub/d.py", "[[]x].py"), root=tmp_path / "pkg")
    found = sorted(p.as_posix() for p in discover_files(["."], config))
    assert found == ["a.py"], found  # build, .venv: default exclusions; gen, f.py: .gitignore; the rest: extend-exclude
    everything = sorted(p.as_posix() for p in discover_files(["."], Config(exclude=(), respect_gitignore=False)))
    assert len(everything) == 8 and "sub/[x].py" in everything
    assert os.getcwd() == str(tmp_path / "pkg")
