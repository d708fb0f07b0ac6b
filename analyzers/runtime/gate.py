"""``mend gate``: fail a build when recorded breaks or recompiles exceed budgets or a baseline (no torch).

Budgets live in ``[tool.mend.gate]``::

    [tool.mend.gate]
    max-graph-breaks = 0          # distinct break sites (whole-frame skips included)
    max-recompiles = 0            # recompile events
    [tool.mend.gate.per-file."legacy/*.py"]
    max-graph-breaks = 3
    [tool.mend.gate.per-region."*:forward"]   # region id "path:line:function", or a function name
    max-recompiles = 1

A file or region override replaces the global budget for the sites inside it; the global budget then
counts only the sites no override covers. Without any budget the gate is strict (0 and 0).

A run that cannot be trusted passes no budget (:func:`run_problems`; ``mend gate --ignore-run-status``
opts out): one whose process exited with a non-zero code (an ``atexit`` handler's or a signal's
included), one that never finished (killed, ``os._exit``: the ``running`` record written before the
program started is still there), one whose program ended without its sites being recorded, one with child
processes whose breaks were not observed, or one that compiled nothing (no graph reached a backend).

A baseline (``mend gate --baseline F``) accepts the sites recorded in ``F`` and fails only on new break
sites or on recompile sites whose count grew. Sites are keyed by path, kind and the text of the source
line, so edits elsewhere in a file do not invalidate the baseline.
"""

from __future__ import annotations

import fnmatch
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import tomllib

from mend.analyzers.runtime.data import FINISHED, BreakSite, RecompileSite, RunData

BASELINE_VERSION = 1


class GateConfigError(Exception):
    """Budgets or a baseline that cannot be used; the message says which key or file."""


@dataclass
class Budget:
    max_graph_breaks: int | None = None
    max_recompiles: int | None = None


@dataclass
class GateConfig:
    budget: Budget = field(default_factory=Budget)
    per_file: dict[str, Budget] = field(default_factory=dict)
    per_region: dict[str, Budget] = field(default_factory=dict)
    source: str = ""  # where it was read from


@dataclass
class Violation:
    scope: str  # "global", "file legacy/*.py", "region *:forward", "baseline"
    what: str  # "graph breaks" | "recompiles"
    actual: int
    allowed: int
    sites: list[Any]

    def describe(self) -> str:
        return f"{self.scope}: {self.actual} {self.what} > {self.allowed} allowed"


@dataclass
class GateResult:
    violations: list[Violation]
    checked: list[str]
    fixed: list[str] = field(default_factory=list)  # baseline sites that no longer occur

    @property
    def passed(self) -> bool:
        return not self.violations


# --------------------------------------------------------------------------------------------------
# config
# --------------------------------------------------------------------------------------------------
def read_tool_config(start: Path | None = None, config_file: Path | None = None) -> tuple[dict[str, Any], str]:
    """The ``[tool.mend]`` table and the file it came from.

    Uses the static analyzer's ``load_config(...).raw`` when it exists; otherwise walks up from
    ``start`` to the first ``pyproject.toml`` that has a ``[tool.mend]`` table.
    """
    start = (start or Path.cwd()).resolve()
    if config_file is not None:
        return _read_toml(config_file), str(config_file)
    try:
        from mend.analyzers.static import load_config  # type: ignore[attr-defined]

        cfg = load_config([start])
        raw = getattr(cfg, "raw", None)
        if isinstance(raw, dict):
            root = getattr(cfg, "root", None)
            return raw, str(Path(root) / "pyproject.toml") if root else ""
    except ImportError:
        pass
    except Exception as exc:  # a broken pyproject: the static loader's message is the clearest
        raise GateConfigError(str(exc)) from exc
    for folder in [start, *start.parents]:
        candidate = folder / "pyproject.toml"
        if candidate.is_file():
            table = _read_toml(candidate)
            if table:
                return table, str(candidate)
    return {}, ""


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        doc = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise GateConfigError(f"config file {path} does not exist") from exc
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise GateConfigError(f"cannot read {path}: {exc}") from exc
    tool = doc.get("tool", {})
    table = tool.get("mend", {}) if isinstance(tool, dict) else {}
    return table if isinstance(table, dict) else {}


def _budget(table: Any, where: str) -> Budget:
    if not isinstance(table, dict):
        raise GateConfigError(f"{where} must be a table, got {type(table).__name__}")
    known = {"max-graph-breaks", "max-recompiles"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise GateConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; expected {', '.join(sorted(known))}")
    values = {}
    for key in known:
        value = table.get(key)
        if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
            raise GateConfigError(f"{where}.{key} must be a non-negative integer, got {value!r}")
        values[key] = value
    return Budget(values["max-graph-breaks"], values["max-recompiles"])


def parse_gate_config(tool_table: dict[str, Any], source: str = "") -> GateConfig:
    gate = tool_table.get("gate", {})
    if not isinstance(gate, dict):
        raise GateConfigError(f"[tool.mend.gate] must be a table (in {source or 'pyproject.toml'})")
    where = "[tool.mend.gate]"
    top = {k: v for k, v in gate.items() if k not in ("per-file", "per-region")}
    cfg = GateConfig(budget=_budget(top, where), source=source)
    for key, target in (("per-file", cfg.per_file), ("per-region", cfg.per_region)):
        table = gate.get(key, {})
        if not isinstance(table, dict):
            raise GateConfigError(f"{where}.{key} must be a table of pattern = {{budgets}}")
        for pattern, sub in table.items():
            target[str(pattern)] = _budget(sub, f'{where}.{key}."{pattern}"')
    return cfg


# --------------------------------------------------------------------------------------------------
# the run itself
# --------------------------------------------------------------------------------------------------
def run_problems(data: RunData) -> list[str]:
    """Why the recorded run cannot pass a gate: its program failed, or it compiled nothing."""
    problems = []
    for run in data.runs:
        what = " ".join(run.argv) or run.kind
        if run.status != FINISHED:
            problems.append(f"the recorded {run.kind} never finished: mend did not see its process end ({what}; "
                            "killed, os._exit, or still running)")
        elif run.exit_code not in (0, None):
            by = f", ended by {run.signal}" if run.signal else ""
            problems.append(f"the recorded {run.kind} exited with code {run.exit_code}{by} ({what})")
        if run.status == FINISHED and not run.recorded:
            problems.append(f"the program of the recorded {run.kind} ended without returning to mend (os._exit or "
                            f"a signal): its graph breaks were not recorded ({what})")
        if run.unobserved_children:
            problems.append(f"{run.unobserved_children} child process(es) of the recorded {run.kind} were not "
                            f"observed: graph breaks in them were not recorded ({what})")
    if not data.runs:
        problems.append("the data file records no run")
    elif data.graph_count == 0:
        skipped = sum(r.frame_skips for r in data.regions)
        problems.append("the run compiled nothing: no graph reached a backend"
                        + (f" ({skipped} frame(s) skipped)" if skipped else " (was torch.compile called?)"))
    return problems


# --------------------------------------------------------------------------------------------------
# budgets
# --------------------------------------------------------------------------------------------------
def _region_match(pattern: str, region_id: str) -> bool:
    function = region_id.rsplit(":", 1)[-1]
    return fnmatch.fnmatchcase(region_id, pattern) or fnmatch.fnmatchcase(function, pattern)


def _in_region(site: Any, pattern: str) -> bool:
    return any(_region_match(pattern, rid) for rid in site.regions)


def check_budgets(data: RunData, cfg: GateConfig, max_graph_breaks: int | None = None,
                  max_recompiles: int | None = None) -> GateResult:
    """Compare the data with the budgets (command-line values replace the global budget)."""
    violations: list[Violation] = []
    checked: list[str] = []
    covered_breaks: set[int] = set()
    covered_recompiles: set[int] = set()

    def apply(scope: str, budget: Budget, breaks: list[BreakSite], recompiles: list[RecompileSite]) -> None:
        if budget.max_graph_breaks is not None:
            checked.append(f"{scope}: graph breaks {len(breaks)} <= {budget.max_graph_breaks}")
            if len(breaks) > budget.max_graph_breaks:
                violations.append(Violation(scope, "graph break sites", len(breaks), budget.max_graph_breaks, breaks))
        if budget.max_recompiles is not None:
            n = sum(r.count for r in recompiles)
            checked.append(f"{scope}: recompiles {n} <= {budget.max_recompiles}")
            if n > budget.max_recompiles:
                violations.append(Violation(scope, "recompiles", n, budget.max_recompiles, recompiles))

    for pattern, budget in cfg.per_file.items():
        b = [s for s in data.breaks if fnmatch.fnmatchcase(s.path, pattern)]
        r = [s for s in data.recompiles if fnmatch.fnmatchcase(s.path, pattern)]
        if budget.max_graph_breaks is not None:
            covered_breaks.update(id(s) for s in b)
        if budget.max_recompiles is not None:
            covered_recompiles.update(id(s) for s in r)
        apply(f'file "{pattern}"', budget, b, r)
    for pattern, budget in cfg.per_region.items():
        b = [s for s in data.breaks if _in_region(s, pattern)]
        r = [s for s in data.recompiles if _in_region(s, pattern)]
        if budget.max_graph_breaks is not None:
            covered_breaks.update(id(s) for s in b)
        if budget.max_recompiles is not None:
            covered_recompiles.update(id(s) for s in r)
        apply(f'region "{pattern}"', budget, b, r)
    overall = Budget(
        max_graph_breaks if max_graph_breaks is not None else cfg.budget.max_graph_breaks,
        max_recompiles if max_recompiles is not None else cfg.budget.max_recompiles,
    )
    if overall.max_graph_breaks is None and overall.max_recompiles is None and not cfg.per_file and not cfg.per_region:
        overall = Budget(0, 0)
    apply(
        "global",
        overall,
        [s for s in data.breaks if id(s) not in covered_breaks],
        [s for s in data.recompiles if id(s) not in covered_recompiles],
    )
    return GateResult(violations, checked)


# --------------------------------------------------------------------------------------------------
# baseline
# --------------------------------------------------------------------------------------------------
def break_key(site: BreakSite) -> str:
    anchor = " ".join(site.source_line.split()) or f"line {site.line}"
    return f"{site.path} | {site.gb_type} | {anchor}"


def recompile_key(site: RecompileSite) -> str:
    anchor = " ".join(site.source_line.split()) or f"line {site.line}"
    return f"{site.path} | {site.function} | {site.kind} | {anchor}"


def baseline_from(data: RunData) -> dict[str, Any]:
    breaks: dict[str, int] = {}
    for b in data.breaks:
        breaks[break_key(b)] = breaks.get(break_key(b), 0) + b.count
    recompiles: dict[str, int] = {}
    for r in data.recompiles:
        recompiles[recompile_key(r)] = recompiles.get(recompile_key(r), 0) + r.count
    return {"version": BASELINE_VERSION, "kind": "mend-gate-baseline", "breaks": breaks, "recompiles": recompiles}


def write_baseline(data: RunData, path: Path) -> dict[str, Any]:
    doc = baseline_from(data)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return doc


def read_baseline(path: Path) -> dict[str, Any]:
    if not path.is_file():
        raise GateConfigError(f"no baseline file at {path}; create it with `mend gate --baseline {path} --update-baseline`")
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise GateConfigError(f"baseline {path} is not readable JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("kind") != "mend-gate-baseline" or doc.get("version") != BASELINE_VERSION:
        raise GateConfigError(f"{path} is not a mend gate baseline (version {BASELINE_VERSION})")
    for key in ("breaks", "recompiles"):
        table = doc.get(key, {})
        if not isinstance(table, dict) or not all(isinstance(v, int) for v in table.values()):
            raise GateConfigError(f"baseline {path}: {key!r} must map site keys to counts")
    return doc


def check_baseline(data: RunData, baseline: dict[str, Any]) -> GateResult:
    now = baseline_from(data)
    old_breaks, old_recompiles = baseline.get("breaks", {}), baseline.get("recompiles", {})
    new_breaks = [b for b in data.breaks if break_key(b) not in old_breaks]
    grown = [
        r for r in data.recompiles
        if now["recompiles"][recompile_key(r)] > old_recompiles.get(recompile_key(r), 0)
    ]
    violations = []
    if new_breaks:
        violations.append(Violation("baseline", "new graph break sites", len(new_breaks), 0, new_breaks))
    if grown:
        extra = sum(now["recompiles"][recompile_key(r)] - old_recompiles.get(recompile_key(r), 0) for r in grown)
        violations.append(Violation("baseline", "more recompiles", extra, 0, grown))
    fixed = sorted(set(old_breaks) - set(now["breaks"])) + sorted(set(old_recompiles) - set(now["recompiles"]))
    checked = [f"baseline: {len(old_breaks)} break site(s), {len(old_recompiles)} recompile site(s) accepted"]
    return GateResult(violations, checked, fixed)
