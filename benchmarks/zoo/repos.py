"""The repositories corpus: public model repositories, checked out in a folder, one small driver each.

The manifest (``benchmarks/corpus/manifest.json``, or ``$MEND_CORPUS_MANIFEST``) names, per repository: the
GitHub name, the commit, the folder it is checked out in (``owner+name``), the files that hold the model
(what ``mend fix`` repairs: the scope of the repaired sources), its driver, and whether it is held out
(chosen at random with a fixed seed before any code was read, :data:`SPLIT` in the manifest). The code itself
is never part of mend's repository: ``benchmarks/corpus/checkout.py`` archives each commit into a folder.

A driver (``benchmarks/corpus/drivers/NAME.py``) defines ``build(repo: Path, mode: str)``, returning a dict
``{"model": ..., "args": (...), "kwargs": {...}, "loss": fn or None}`` (small config, random weights; the
model in the mode asked); a driver with several rows defines ``ROWS = {"row": build_fn, ...}`` instead, and the
rows are named ``NAME:row``. The repository's folder is first on ``sys.path`` while its row runs; the modules
imported from it are forgotten before the next row (two repositories may both have a ``model.py``, or a
``util/`` folder without ``__init__.py``: a namespace package, forgotten by its path), so are the stand-in
modules a driver put in ``sys.modules`` (DeepCTR's empty ``tensorflow``, which DLRM and decision-transformer
would take for the real one), and the builtins it replaced are put back (DLRM replaces ``print`` when its
module is imported).
"""

from __future__ import annotations

import builtins
import importlib.util
import json
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.zoo.suites import Case
from mend import settings


def _default_manifest() -> Path:
    here = Path(__file__).resolve()
    for up in here.parents:
        cand = up / "benchmarks" / "corpus" / "manifest.json"
        if cand.is_file():
            return cand
    return here.parent.parent / "benchmarks" / "corpus" / "manifest.json"


def manifest_path() -> Path:
    return settings.CORPUS_MANIFEST.get() or _default_manifest()


def load_manifest(path: Path | None = None) -> dict[str, Any]:
    path = path or manifest_path()
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise RuntimeError(f"cannot read the corpus manifest {path}: {exc}") from exc


def entries(path: Path | None = None) -> list[dict[str, Any]]:
    return list(load_manifest(path)["repos"])


def _driver(entry: dict[str, Any], manifest: Path | None = None) -> Any:
    base = (manifest or manifest_path()).parent
    file = base / entry["driver"]
    spec = importlib.util.spec_from_file_location(f"_mend_corpus_driver_{entry['name'].replace('-', '_')}", file)
    if spec is None or spec.loader is None:
        raise RuntimeError(f"cannot load the driver {file}")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def manifest_rows(path: Path | None = None) -> list[str]:
    """Every row: a repository's name, or ``name:row`` for a driver with several rows (read from the driver
    file without importing it: its ``ROWS`` keys are listed in the manifest's ``rows``)."""
    out = []
    for e in entries(path):
        rows = e.get("rows")
        out += [f"{e['name']}:{r}" for r in rows] if rows else [e["name"]]
    return out


def held_out(path: Path | None = None) -> set[str]:
    return {e["name"] for e in entries(path) if e.get("held_out")}


def entry_of(row: str, path: Path | None = None) -> dict[str, Any]:
    name = row.partition(":")[0]
    for e in entries(path):
        if e["name"] == name:
            return e
    raise KeyError(f"no repository {name!r} in the manifest")


def model_files(rows: Sequence[Any], path: Path | None = None) -> list[str]:
    """The scope ``mend fix`` repairs for these rows: the model files of their repositories, relative to the
    folder of checkouts."""
    names = {getattr(r, "name", r).partition(":")[0] for r in rows}
    return sorted({f"{e['dir']}/{f}" for e in entries(path) if e["name"] in names for f in e["files"]})


def _namespace_paths(mod: Any) -> list[str]:
    """The folders of a namespace package (a folder without ``__init__.py``: no ``__file__``)."""
    spec = getattr(mod, "__spec__", None)
    try:
        return [str(p) for p in (getattr(spec, "submodule_search_locations", None) or [])]
    except Exception:  # noqa: BLE001 - a module's odd __path__ (torch.classes), a parent already gone
        return []


def seed_all(seed: int) -> None:
    """Seed every generator a driver's model may draw its weights from: Python's, numpy's and torch's. Each
    source runs in a worker process of its own, so an unseeded draw gives the original and a repaired copy
    different weights."""
    import random

    import torch

    random.seed(seed)
    torch.manual_seed(seed)
    try:
        import numpy
    except ImportError:
        return
    numpy.random.seed(seed)


class ReposSuite:
    name = "repos"

    def __init__(self, root: str) -> None:
        self.root = str(Path(root).resolve())
        self._path_entry: str | None = None
        self._builtins = dict(vars(builtins))
        self._modules: set[str] = set(sys.modules)  # what was imported before the row began

    def _forget(self) -> None:
        """Drop the modules the previous row imported from its repository, and its ``sys.path`` entry."""
        if self._path_entry is None:
            return
        prefix = self._path_entry.rstrip(os.sep) + os.sep
        drop = []  # decided before any is dropped: a namespace package's path is recomputed from its parent's
        for name, mod in list(sys.modules.items()):
            file = getattr(mod, "__file__", None) or ""
            paths = [] if file else _namespace_paths(mod)
            if ((file and os.path.realpath(file).startswith(prefix))
                    or any(os.path.realpath(p).startswith(prefix) for p in paths)
                    or (name not in self._modules and getattr(mod, "__spec__", None) is None)
                    or getattr(mod, "_mend_stand_in", False)):
                drop.append(name)  # ... and a stand-in a driver put in (DeepCTR's empty tensorflow)
        for name in drop:
            sys.modules.pop(name, None)
        while self._path_entry in sys.path:
            sys.path.remove(self._path_entry)
        for name, value in self._builtins.items():
            if vars(builtins).get(name) is not value:
                setattr(builtins, name, value)
        importlib.invalidate_caches()
        self._path_entry = None

    def reset_messages(self) -> None:
        pass

    def case(self, name: str, mode: str, dtype: str, profile: str) -> Case:
        self._forget()
        self._modules = set(sys.modules)
        entry = entry_of(name)
        repo = Path(self.root) / entry["dir"]
        self._path_entry = os.path.realpath(repo / entry.get("path", "."))
        sys.path.insert(0, self._path_entry)
        driver = _driver(entry)
        row = name.partition(":")[2]
        build = driver.ROWS[row] if row else driver.build
        seed_all(0)  # numpy too: DLRM draws its embedding tables with np.random, each worker from its own state
        made = build(repo, mode)
        model = made["model"]
        model.train(mode == "train")
        return Case(model, args=tuple(made.get("args", ())), kwargs=dict(made.get("kwargs", {})),
                    loss=made.get("loss"), model_class=type(model).__name__, note=made.get("note", ""))
