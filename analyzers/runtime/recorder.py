"""The recorder: turns Dynamo's events into deduplicated break sites, recompiles and regions.

Use :func:`mend.analyzers.runtime.record` (a context manager) rather than this class directly.
All private torch access goes through :mod:`mend.analyzers.runtime.compat`.
"""

from __future__ import annotations

import copy
import linecache
import os
import site
import sys
import sysconfig
import threading
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from mend.analyzers.runtime import compat
from mend.analyzers.runtime.data import BreakSite, RecompileSite, Region, RunData, RunInfo

_SKIP_PREFIX = "Failed to handle graph break gracefully"
_RECOMPILE_LIMIT = "recompile limit exceeded"


class ProjectFilter:
    """Decides which files are the user's project and which are library code.

    Library code is everything under site-packages/dist-packages, the standard library, torch and mend
    itself, plus pseudo-files (``<frozen ...>``, ``<string>``). ``source`` folders are always part of
    the project, even inside site-packages (like coverage's ``--source``): pass the transformers
    folder to attribute breaks to lines inside transformers.
    """

    def __init__(self, source: Iterable[str | os.PathLike[str]] = (), root: str | os.PathLike[str] | None = None):
        self.root = Path(root or os.getcwd()).resolve()
        self.source = [self._norm(s) for s in source]
        libs: set[str] = set()
        for key in ("stdlib", "platstdlib", "purelib", "platlib"):
            value = sysconfig.get_paths().get(key)
            if value:
                libs.add(self._norm(value))
        try:
            libs.update(self._norm(p) for p in site.getsitepackages())
        except AttributeError:  # virtualenvs without getsitepackages
            pass
        import torch

        libs.add(self._norm(Path(torch.__file__).parent))
        here = Path(__file__).resolve().parent.parent.parent  # the folder holding analyzers/, cli/ ...
        for pkg in ("analyzers", "cli", "rewriter", "compiler"):
            libs.add(self._norm(here / pkg))
        self.library = sorted(libs)
        self._cache: dict[str, bool] = {}

    @staticmethod
    def _norm(path: str | os.PathLike[str]) -> str:
        return os.path.normcase(os.path.realpath(os.fspath(path))).rstrip(os.sep) + os.sep

    def is_project(self, filename: str) -> bool:
        hit = self._cache.get(filename)
        if hit is None:
            hit = self._cache[filename] = self._classify(filename)
        return hit

    def _classify(self, filename: str) -> bool:
        if not filename or filename.startswith("<"):
            return False
        path = self._norm(filename)
        if any(path.startswith(s) for s in self.source):
            return True
        if f"{os.sep}site-packages{os.sep}" in path or f"{os.sep}dist-packages{os.sep}" in path:
            return False
        return not any(path.startswith(lib) for lib in self.library)

    def display(self, filename: str) -> str:
        """Project-relative path where possible (stable across machines, for baselines)."""
        try:
            real = Path(os.path.realpath(filename))
            return real.relative_to(self.root).as_posix()
        except (ValueError, OSError):
            return filename


def counting_backend() -> CountingBackend:
    """A ``torch.compile`` backend that keeps every graph and runs it eagerly.

    Same breaks and recompiles as ``backend="eager"``: ``b = counting_backend();
    torch.compile(fn, backend=b)``; then ``len(b.graphs)``.
    """
    return CountingBackend()


class CountingBackend:
    def __init__(self) -> None:
        self.graphs: list[Any] = []

    def __call__(self, gm: Any, example_inputs: Any) -> Any:
        self.graphs.append(gm)
        return gm.forward

    @property
    def count(self) -> int:
        return len(self.graphs)


class Recorder:
    """Collects graph breaks, recompiles and graphs while active (see :func:`record`)."""

    def __init__(
        self,
        source: Iterable[str | os.PathLike[str]] = (),
        root: str | os.PathLike[str] | None = None,
        fast: bool = False,
        kind: str = "record",
        track_lines: bool = False,
    ) -> None:
        self.filter = ProjectFilter(source, root)
        self.fast = fast
        self.track_lines = track_lines
        self.lines: set[tuple[str, int]] = set()  # (file, line) Dynamo traced, with track_lines
        self.kind = kind
        self.current_test: str | None = None
        self._lock = threading.RLock()
        self._breaks: dict[tuple[str, int, str], BreakSite] = {}
        self._recompiles: dict[tuple[str, int, str, str], RecompileSite] = {}
        self._regions: dict[str, Region] = {}
        self._frames: dict[str, tuple[str, int, str]] = {}  # frame id -> original (file, line, fn)
        self._known_functions: dict[tuple[str, str], set[int]] = {}
        self._skips_by_compile: dict[str, list[BreakSite]] = {}
        self.tests: dict[str, dict[str, int]] = {}
        self.traced: set[tuple[str, int, int, str]] = set()  # (file, first, last line, function) Dynamo traced
        self._active = False
        self._started = 0.0
        self.info = RunInfo(kind=kind, fast=fast, torch=compat.TORCH_VERSION, python=sys.version.split()[0])
        self.sink: Any = None  # called after every event (a child process writes its record there)

    def reset(self) -> None:
        """Forget every site, region and count seen so far (a forked child starts empty)."""
        with self._lock:
            self._breaks.clear()
            self._recompiles.clear()
            self._regions.clear()
            self._frames.clear()
            self._known_functions.clear()
            self._skips_by_compile.clear()
            self.tests.clear()
            self.traced.clear()
            self.lines.clear()

    def _event_done(self) -> None:
        if self.sink is not None:
            self.sink()

    # -- lifecycle ---------------------------------------------------------------------------------
    def start(self) -> Recorder:
        if not self._active:
            self._active = True
            self._started = time.perf_counter()
            if not self.info.started:
                self.info.started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
            compat.add_listener(self)
        return self

    def stop(self) -> Recorder:
        if self._active:
            compat.remove_listener(self)
            self._active = False
            self.info.duration_s = round(self.info.duration_s + time.perf_counter() - self._started, 4)
        return self

    def __enter__(self) -> Recorder:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- results -----------------------------------------------------------------------------------
    @property
    def breaks(self) -> list[BreakSite]:
        """Deduplicated break sites, in the order first seen."""
        with self._lock:
            return list(self._breaks.values())

    @property
    def recompiles(self) -> list[RecompileSite]:
        with self._lock:
            return list(self._recompiles.values())

    @property
    def regions(self) -> dict[str, Region]:
        """Compiled regions by id (``path:line:function``)."""
        with self._lock:
            return dict(self._regions)

    @property
    def graphs(self) -> int:
        """Graphs handed to the backend, over all regions."""
        return sum(r.graphs for r in self.regions.values())

    @property
    def graph_break_count(self) -> int:
        """Distinct break sites (frame skips included)."""
        return len(self._breaks)

    @property
    def break_count(self) -> int:
        """Break occurrences: every time Dynamo hit a break site."""
        return sum(b.count for b in self.breaks)

    @property
    def recompile_count(self) -> int:
        return sum(r.count for r in self.recompiles)

    @property
    def frame_skips(self) -> list[BreakSite]:
        return [b for b in self.breaks if b.frame_skip]

    def graphs_in(self, function: str) -> int:
        """Graphs of the regions whose function is named ``function``."""
        return sum(r.graphs for r in self.regions.values() if r.function == function)

    def data(self) -> RunData:
        """A snapshot as :class:`RunData` (what ``mend run`` writes)."""
        with self._lock:
            return RunData(
                root=str(self.filter.root),
                runs=[copy.deepcopy(self.info)],
                breaks=copy.deepcopy(list(self._breaks.values())),
                recompiles=copy.deepcopy(list(self._recompiles.values())),
                regions=copy.deepcopy(list(self._regions.values())),
                tests={k: dict(v) for k, v in self.tests.items()},
            )

    def summary(self) -> str:
        return (
            f"{self.graph_break_count} graph break site(s) ({self.break_count} occurrence(s), "
            f"{len(self.frame_skips)} frame skip(s)), {self.recompile_count} recompile(s), "
            f"{self.graphs} graph(s) in {len(self._regions)} region(s)"
        )

    # -- helpers -----------------------------------------------------------------------------------
    def _count_test(self, what: str, n: int = 1) -> None:
        if self.current_test is not None:
            counts = self.tests.setdefault(self.current_test, {"breaks": 0, "recompiles": 0, "graphs": 0})
            counts[what] = counts.get(what, 0) + n

    def _region_for(self, frame: tuple[str, int, str] | None, compile_id: str | None) -> Region | None:
        """The region of a compiled frame; resume functions map to their original function."""
        frame_id = compile_id.split("/")[0] if compile_id else None
        if frame is None:
            frame = self._frames.get(frame_id) if frame_id is not None else None
            if frame is None:
                return None
        else:
            filename, first, name = frame
            original, at = compat.original_function(name)
            if original != name:
                candidates = [ln for ln in self._known_functions.get((filename, original), ()) if at is None or ln <= at]
                first = max(candidates) if candidates else first
                name = original
            else:
                self._known_functions.setdefault((filename, name), set()).add(first)
            frame = (filename, first, name)
            if frame_id is not None:
                self._frames[frame_id] = frame
        filename, first, name = frame
        path = self.filter.display(filename)
        rid = f"{path}:{first}:{name}"
        region = self._regions.get(rid)
        if region is None:
            region = self._regions[rid] = Region(
                id=rid, path=path, line=first, function=name, in_library=not self.filter.is_project(filename)
            )
        return region

    def _attribute(self, real: list[compat.StackEntry], above: list[compat.StackEntry]) -> tuple[compat.StackEntry, bool]:
        """The user's line for a break: the innermost project frame of the break's stack.

        Library frames (``copy.py:153`` for ``copy.deepcopy``) are skipped outward to the user's
        calling line; when the compiled code has no project frame at all, the project line that
        called into it is used; failing that, the innermost frame (marked as library).
        """
        for entry in reversed(real):
            if self.filter.is_project(entry[0]):
                return entry, False
        for entry in reversed(above):
            if self.filter.is_project(entry[0]):
                return entry, False
        if real:
            return real[-1], True
        if above:
            return above[-1], True
        return ("<unknown>", 1, "<unknown>", ""), True

    # -- events from compat ------------------------------------------------------------------------
    def on_break(self, info: dict[str, Any]) -> None:
        parsed = compat.parse_reason(info["reason"], info["gb_type"])
        real = [(f, ln, compat.original_function(fn)[0], text) for f, ln, fn, text in info["real_stack"]]
        raw_above = info["above"]
        if callable(raw_above) and not any(self.filter.is_project(entry[0]) for entry in info["real_stack"]):
            raw_above = raw_above()
        elif callable(raw_above):
            raw_above = []
        above = [(f, ln, compat.original_function(fn)[0], text) for f, ln, fn, text in raw_above]
        (filename, line, function, text), in_library = self._attribute(real, above)
        skip = info["reason"].lstrip().startswith(_SKIP_PREFIX)
        with self._lock:
            self.traced.update(info.get("traced") or ())
            region = self._region_for(info.get("frame"), info.get("compile_id"))
            path = self.filter.display(filename)
            key = (path, int(line), parsed["gb_type"])
            site_ = self._breaks.get(key)
            if site_ is None:
                outer = parsed["outer_gb_type"]
                site_ = self._breaks[key] = BreakSite(
                    path=path,
                    line=int(line),
                    function=function,
                    gb_type=parsed["gb_type"],
                    registry_id=compat.registry_id(parsed["gb_type"]),
                    message=parsed["message"],
                    hints=parsed["hints"],
                    count=0,
                    frame_skip=skip,
                    outer_gb_type=outer,
                    outer_registry_id=compat.registry_id(outer),
                    in_library=in_library,
                    source_line=text or linecache.getline(filename, int(line)).strip(),
                    stack=[[self.filter.display(f), ln, fn] for f, ln, fn, _ in real if self.filter.is_project(f)],
                    reason=info["reason"][:4000],
                )
            site_.count += 1
            site_.frame_skip = site_.frame_skip or skip
            if region is not None:
                region.breaks += 1
                if region.id not in site_.regions:
                    site_.regions.append(region.id)
            if self.current_test and self.current_test not in site_.tests:
                site_.tests.append(self.current_test)
            if info.get("compile_id"):
                self._skips_by_compile.setdefault(info["compile_id"], []).append(site_)
            self._count_test("breaks")
        self._event_done()

    def on_line(self, filename: str, lineno: int) -> None:
        self.lines.add((filename, lineno))

    def on_graph(self, info: dict[str, Any]) -> None:
        with self._lock:
            self.traced.update(info.get("traced") or ())
            region = self._region_for(info.get("frame"), info.get("compile_id"))
            if region is not None:
                region.graphs += 1
            self._count_test("graphs")
        self._event_done()

    def on_compile(self, info: dict[str, Any]) -> None:
        compile_id = info.get("compile_id")
        with self._lock:
            region = self._region_for(info.get("frame"), compile_id)
            pending = self._skips_by_compile.pop(compile_id, []) if compile_id else []
            if region is None:
                return
            region.compiles += 1
            region.compile_time_s = round(region.compile_time_s + float(info.get("time_s") or 0.0), 6)
            failed = bool(info.get("fail_type")) and not info.get("has_guarded_code")
            limit_hit = _RECOMPILE_LIMIT in (info.get("fail_reason") or "")
            if failed and not limit_hit:
                region.frame_skips += 1
                for site_ in pending:
                    site_.frame_skip = True
            reason = info.get("recompile_reason")
            if reason:
                region.recompiles += 1
                self._record_recompile(region, info.get("frame"), reason, limit_hit)
                self._count_test("recompiles")
        self._event_done()

    def _record_recompile(self, region: Region, frame: Any, reason: str, limit_hit: bool) -> None:
        parsed = compat.parse_recompile_reason(reason)
        guard_frame = next((f for f in reversed(parsed["user_frames"]) if self.filter.is_project(f[0])), None)
        if guard_frame is not None:
            path, line = self.filter.display(guard_frame[0]), guard_frame[1]
            source_line = linecache.getline(guard_frame[0], guard_frame[1]).strip()
            in_library = False
        else:
            path, line = region.path, region.line
            source_line = ""
            in_library = region.in_library
        kind = classify_guard(parsed["guard"], reason)
        key = (path, int(line), region.function, kind)
        site_ = self._recompiles.get(key)
        if site_ is None:
            site_ = self._recompiles[key] = RecompileSite(
                path=path,
                line=int(line),
                function=region.function,
                kind=kind,
                count=0,
                guard=parsed["guard"],
                reason=parsed["text"][:2000],
                function_path=region.path,
                function_line=region.line,
                in_library=in_library,
                source_line=source_line,
            )
        site_.count += 1
        site_.limit_hit = site_.limit_hit or limit_hit
        if region.id not in site_.regions:
            site_.regions.append(region.id)
        if self.current_test and self.current_test not in site_.tests:
            site_.tests.append(self.current_test)


def classify_guard(guard: str, reason: str) -> str:
    """A short name for what changed: the recompile trigger (dynamo.md section 5)."""
    text = reason or guard
    if "integer attributes of the nn.Module" in text:
        return "int-attribute"
    if "dtype mismatch" in text:
        return "dtype"
    if "size mismatch" in text:
        return "shape"
    if "stride mismatch" in text:
        return "stride"
    if "requires_grad mismatch" in text:
        return "requires-grad"
    if ".training ==" in guard or ".training" in guard and "==" in guard:
        return "train-eval"
    if "GLOBAL_STATE" in text:
        return "global-state"
    if "BACKEND_MATCH" in text:
        return "backend"
    if guard.startswith("G[") or guard.startswith("G."):
        return "global-value"
    if guard.startswith("len("):
        return "length"
    if guard.startswith("self.") or guard.startswith("L['self']"):
        return "attribute"
    if "==" in guard:
        return "value"
    return "other"
