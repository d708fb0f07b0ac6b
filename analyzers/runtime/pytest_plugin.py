"""pytest plugin (entry point ``pytest11``): record graph breaks and recompiles while tests run.

* ``pytest --mend``: records the whole session with per-test attribution and writes the data file
  (``--mend-data-file``, default ``.mend/run.json``; ``mend report`` and ``mend gate`` read it).
* ``--mend-max-breaks N`` / ``--mend-max-recompiles N``: fail the session when the recorded distinct
  break sites / recompiles exceed N (the tests themselves still pass).
* ``@pytest.mark.mend(max_breaks=0, max_recompiles=0)``: a per-test budget; the test fails when the
  code it runs breaks or recompiles more than that. It works with or without ``--mend``.
* ``--mend-source DIR`` (repeatable) and ``--mend-fast`` as in ``mend run``.

With pytest-xdist each worker records its own part; the controller merges them into one file.
torch is imported only when recording is actually requested.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mend.analyzers.paths import default_refused

_KEY = "_mend_plugin"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("mend", "mend: record torch.compile graph breaks and recompiles")
    group.addoption("--mend", action="store_true", default=False, help="Record graph breaks and recompiles.")
    group.addoption("--mend-data-file", default=None, help="Data file to write (default .mend/run.json).")
    group.addoption("--mend-max-breaks", type=int, default=None, help="Fail the session above N break sites.")
    group.addoption("--mend-max-recompiles", type=int, default=None, help="Fail the session above N recompiles.")
    group.addoption("--mend-source", action="append", default=[], help="A folder that is part of the project.")
    group.addoption("--mend-fast", action="store_true", default=False, help="Run captured graphs eagerly.")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "mend(max_breaks=None, max_recompiles=None): fail the test when torch.compile breaks the graph "
        "at more sites or recompiles more often than allowed while it runs",
    )
    wants = config.getoption("--mend") or config.getoption("--mend-max-breaks") is not None or (
        config.getoption("--mend-max-recompiles") is not None
    )
    if wants:
        plugin = _MendSession(config)
        setattr(config, _KEY, plugin)
        config.pluginmanager.register(plugin, "mend-session")


def _budget(item: pytest.Item) -> tuple[int | None, int | None] | None:
    marker = item.get_closest_marker("mend")
    if marker is None:
        return None
    if marker.args:
        raise pytest.UsageError(f"{item.nodeid}: use @pytest.mark.mend(max_breaks=..., max_recompiles=...)")
    unknown = set(marker.kwargs) - {"max_breaks", "max_recompiles"}
    if unknown:
        raise pytest.UsageError(f"{item.nodeid}: unknown mend marker argument(s) {sorted(unknown)}")
    return marker.kwargs.get("max_breaks"), marker.kwargs.get("max_recompiles")


def _test_counts(recorder: Any, nodeid: str) -> tuple[list[Any], list[Any], int]:
    breaks = [b for b in recorder.breaks if nodeid in b.tests]
    recompiles = [r for r in recorder.recompiles if nodeid in r.tests]
    count = recorder.tests.get(nodeid, {}).get("recompiles", 0)
    return breaks, recompiles, count


def _describe(site: Any) -> str:
    if hasattr(site, "gb_type"):
        kind = "frame skip" if site.frame_skip else "graph break"
        return f"{site.path}:{site.line}: {kind} [{site.registry_id or '-'}] {site.gb_type}: {site.message}"
    return f"{site.path}:{site.line}: recompile ({site.kind}) of {site.function}: {site.guard}"


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Any:
    budget = _budget(item)
    session: _MendSession | None = getattr(item.config, _KEY, None)
    own = None
    if budget is not None and session is None:
        from mend.analyzers.runtime.recorder import Recorder

        own = Recorder(kind="pytest")
        own.current_test = item.nodeid
        own.start()
    try:
        result = yield
    finally:
        if own is not None:
            own.stop()
    recorder = own if own is not None else (session.recorder if session else None)
    if budget is not None and recorder is not None:
        max_breaks, max_recompiles = budget
        breaks, recompiles, n_recompiles = _test_counts(recorder, item.nodeid)
        problems = []
        if max_breaks is not None and len(breaks) > max_breaks:
            problems.append(f"{len(breaks)} graph break site(s) > max_breaks={max_breaks}")
            problems.extend("    " + _describe(b) for b in breaks)
        if max_recompiles is not None and n_recompiles > max_recompiles:
            problems.append(f"{n_recompiles} recompile(s) > max_recompiles={max_recompiles}")
            problems.extend("    " + _describe(r) for r in recompiles)
        if problems:
            pytest.fail("mend budget exceeded: " + "\n".join(problems), pytrace=False)
    return result


class _MendSession:
    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.recorder: Any = None
        self.worker = getattr(config, "workerinput", {}).get("workerid") if hasattr(config, "workerinput") else None
        self.is_controller = not self.worker and _xdist_active(config)
        named = config.getoption("--mend-data-file")
        self.path = Path(named or Path(".mend") / "run.json")
        refused = None if named else default_refused(self.path, Path.cwd(), "--mend-data-file")
        if refused:
            raise pytest.UsageError(f"mend: {refused}")
        if not self.path.is_absolute():
            self.path = Path.cwd() / self.path
        self.violations: list[str] = []
        self.data: Any = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        if self.is_controller:
            for stale in self.path.parent.glob(self.path.name + ".gw*"):
                stale.unlink()
            return
        from mend.analyzers.runtime.recorder import Recorder

        self.recorder = Recorder(
            source=self.config.getoption("--mend-source"),
            root=str(self.config.rootpath),
            fast=self.config.getoption("--mend-fast"),
            kind="pytest",
        )
        self.recorder.info.argv = ["pytest", *self.config.invocation_params.args]
        self.recorder.start()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Any) -> Any:
        if self.recorder is not None:
            self.recorder.current_test = item.nodeid
        try:
            return (yield)
        finally:
            if self.recorder is not None:
                self.recorder.current_test = None

    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        from mend.analyzers.runtime.data import DataFileError, load, save

        if self.recorder is not None:
            self.recorder.stop()
            self.recorder.info.exit_code = int(exitstatus)
            data = self.recorder.data()
            if self.worker:
                save(data, self.path.with_name(f"{self.path.name}.{self.worker}"))
                return
            self.data = save(data, self.path)
        elif self.is_controller:
            parts = sorted(self.path.parent.glob(self.path.name + ".gw*"))
            merged = None
            for part in parts:
                try:
                    piece = load(part)
                except DataFileError:
                    continue
                merged = piece if merged is None else merged.merge(piece)
                part.unlink()
            if merged is None:
                return
            if len(merged.runs) > 1:  # one session, recorded by several workers
                first = merged.runs[0]
                first.duration_s = max(r.duration_s for r in merged.runs)
                merged.runs = [first]
            self.data = save(merged, self.path)
        if self.data is None:
            return
        max_breaks = self.config.getoption("--mend-max-breaks")
        max_recompiles = self.config.getoption("--mend-max-recompiles")
        if max_breaks is not None and self.data.graph_break_count > max_breaks:
            self.violations.append(f"{self.data.graph_break_count} graph break site(s) > --mend-max-breaks={max_breaks}")
            self.violations.extend("  " + _describe(b) for b in self.data.breaks)
        if max_recompiles is not None and self.data.recompile_count > max_recompiles:
            self.violations.append(f"{self.data.recompile_count} recompile(s) > --mend-max-recompiles={max_recompiles}")
            self.violations.extend("  " + _describe(r) for r in self.data.recompiles)
        if self.violations and session.exitstatus == 0:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if self.data is None:
            return
        from mend.analyzers.runtime.report import summary_line

        tr = terminalreporter
        tr.section("mend")
        tr.write_line(f"recorded {summary_line(self.data)}; wrote {self.path}")
        worst = sorted(self.data.tests.items(), key=lambda kv: -(kv[1].get("breaks", 0) + kv[1].get("recompiles", 0)))
        for nodeid, counts in worst[:5]:
            if counts.get("breaks", 0) or counts.get("recompiles", 0):
                tr.write_line(f"  {nodeid}: {counts.get('breaks', 0)} break(s), {counts.get('recompiles', 0)} recompile(s)")
        if self.violations:
            tr.write_line("mend budget exceeded:", red=True, bold=True)
            for line in self.violations:
                tr.write_line("  " + line, red=True)


def _xdist_active(config: pytest.Config) -> bool:
    """True in an xdist controller that will hand the tests to workers (``-n N`` with N > 0)."""
    return bool(getattr(config.option, "numprocesses", None)) and getattr(config.option, "dist", "no") != "no"
