"""The runtime data file (``.mend/run.json``): what ``mend run`` writes and ``report``/``gate`` read.

This module never imports torch, so reporting and gating are cheap. The format is versioned JSON
(``"version": 1``), published as a JSON Schema next to this module (``run-data.schema.json``, shipped
with the package); :func:`load` checks a file against it and rejects anything else with a
:class:`DataFileError` that names the first wrong field. In short (``docs/runtime.md`` has more)::

    {
      "version": 1,
      "tool": {"name": "mend", "version": "0.1.0"},
      "root": "/abs/project/root",          # relative paths below are relative to this folder
      "runs": [{"argv": [...], "started": "ISO-8601", "duration_s": 1.2, "exit_code": 0,
                "fast": false, "torch": "2.13.0", "python": "3.11.7"}],
      "breaks": [BreakSite...],             # deduplicated by (path, line, gb_type)
      "recompiles": [RecompileSite...],     # deduplicated by (path, line, function, kind)
      "regions": [Region...],               # one per function Dynamo compiled as a frame
      "tests": {"nodeid": {"breaks": n, "recompiles": n, "graphs": n}},  # pytest --mend only
      "repaired": [{"module", "path", "status", "applied": [...]}]       # mend run --repair only
    }

A *break site* is one source line where Dynamo broke the graph (or skipped the whole frame); its
``count`` is how many times Dynamo hit it (once per compiled version, per loop re-entry, per inlining).
"""

from __future__ import annotations

import functools
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from mend.safeio import NotRegular, folder_lock, read_file

VERSION = 1
MAX_DATA_BYTES = 1 << 30  # a data file larger than this is not read
DEFAULT_DATA_FILE = Path(".mend") / "run.json"
SCHEMA_FILE = Path(__file__).with_name("run-data.schema.json")


class DataFileError(Exception):
    """A data file that is missing, unreadable, not JSON or not of a supported version."""


@dataclass
class BreakSite:
    """One source line where Dynamo broke the graph or gave up on the whole frame."""

    path: str  # project-relative where possible
    line: int
    function: str
    gb_type: str  # root cause: the first gb_type in a nested message
    registry_id: str | None  # "GB0059"; None when the registry does not know the gb_type
    message: str  # the Explanation line of the root cause
    hints: list[str] = field(default_factory=list)
    count: int = 1
    frame_skip: bool = False  # Dynamo skipped the whole frame (0 graphs for it)
    outer_gb_type: str | None = None  # the wrapping gb_type of a nested message ("graph break in loop")
    outer_registry_id: str | None = None
    in_library: bool = False  # no project frame on the stack: attributed to a library line
    source_line: str = ""  # the text of the line, stripped
    stack: list[list[Any]] = field(default_factory=list)  # project frames [[path, line, function], ...]
    regions: list[str] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)
    reason: str = ""  # the full reason text of the first occurrence (trimmed)

    @property
    def key(self) -> tuple[str, int, str]:
        return (self.path, self.line, self.gb_type)


@dataclass
class RecompileSite:
    """A function Dynamo compiled again, with the guard that failed."""

    path: str  # where the guard's source line is, else the function's file
    line: int  # the guard's source line when it has one, else the function's first line
    function: str
    kind: str  # classified trigger: int-attribute, scalar-argument, dtype, shape, ...
    count: int = 1
    guard: str = ""  # the first failing guard, e.g. "self.step == 3"
    reason: str = ""  # the first reason text, as Dynamo printed it (without the compile id)
    function_path: str = ""
    function_line: int = 0
    limit_hit: bool = False  # the recompile limit was hit: the frame now runs eagerly
    in_library: bool = False
    source_line: str = ""
    regions: list[str] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, int, str, str]:
        return (self.path, self.line, self.function, self.kind)


@dataclass
class Region:
    """A function Dynamo compiled as a frame (resume functions are folded into their function)."""

    id: str  # "path:line:function"
    path: str
    line: int
    function: str
    graphs: int = 0  # graphs handed to the backend
    compiles: int = 0  # frame compiles (first compile + recompiles + resume functions)
    recompiles: int = 0
    frame_skips: int = 0  # compiles that gave up and fell back to eager
    breaks: int = 0  # graph-break occurrences inside it
    compile_time_s: float = 0.0
    in_library: bool = False


RUNNING, RETURNED, FINISHED = "running", "returned", "finished"


@dataclass
class RunInfo:
    """One recorded run. ``mend run`` writes it as ``running`` before the program starts, as ``returned``
    when the program has returned to mend (its sites recorded), and as ``finished`` once the process has
    exited, with the exit code the process really ended with (an ``atexit`` handler or a signal may change
    it); ``recorded`` is false when the program ended without returning to mend (``os._exit``, a signal),
    so its sites were never seen. ``children``: the child processes whose records were merged;
    ``unobserved_children``: child processes that started but recorded nothing (their breaks were not seen).
    A record without a ``status`` (older mend) counts as finished."""

    argv: list[str] = field(default_factory=list)
    started: str = ""
    duration_s: float = 0.0
    exit_code: int | None = None
    fast: bool = False
    torch: str = ""
    python: str = ""
    kind: str = "run"  # run | pytest | record | child
    id: str = ""
    status: str = FINISHED  # running | returned | finished
    recorded: bool = True
    signal: str = ""  # the signal that ended the process (SIGKILL), when one did
    children: int = 0
    unobserved_children: int = 0


@dataclass
class RunData:
    root: str = ""
    runs: list[RunInfo] = field(default_factory=list)
    breaks: list[BreakSite] = field(default_factory=list)
    recompiles: list[RecompileSite] = field(default_factory=list)
    regions: list[Region] = field(default_factory=list)
    tests: dict[str, dict[str, int]] = field(default_factory=dict)
    tool: dict[str, str] = field(default_factory=dict)
    repaired: list[dict[str, Any]] = field(default_factory=list)  # modules repaired at import (mend.imports)

    # -- summary numbers ---------------------------------------------------------------------------
    @property
    def graph_break_count(self) -> int:
        """Distinct break sites (what a gate budgets)."""
        return len(self.breaks)

    @property
    def recompile_count(self) -> int:
        """Recompile events (every extra compile of a frame caused by a failing guard)."""
        return sum(r.count for r in self.recompiles)

    @property
    def graph_count(self) -> int:
        return sum(r.graphs for r in self.regions)

    @property
    def compile_time_s(self) -> float:
        return sum(r.compile_time_s for r in self.regions)

    def to_dict(self) -> dict[str, Any]:
        from mend.version import __version__

        return {
            "version": VERSION,
            "tool": self.tool or {"name": "mend", "version": __version__},
            "root": self.root,
            "summary": {
                "graph_breaks": self.graph_break_count,
                "break_occurrences": sum(b.count for b in self.breaks),
                "frame_skips": sum(1 for b in self.breaks if b.frame_skip),
                "recompiles": self.recompile_count,
                "graphs": self.graph_count,
                "regions": len(self.regions),
                "compile_time_s": round(self.compile_time_s, 4),
            },
            "runs": [asdict(r) for r in self.runs],
            "breaks": [asdict(b) for b in self.breaks],
            "recompiles": [asdict(r) for r in self.recompiles],
            "regions": [asdict(r) for r in self.regions],
            "tests": self.tests,
            **({"repaired": self.repaired} if self.repaired else {}),
        }

    @classmethod
    def from_dict(cls, raw: Any, origin: str = "data") -> RunData:
        if not isinstance(raw, dict):
            raise DataFileError(f"{origin}: expected a JSON object, got {type(raw).__name__}")
        version = raw.get("version")
        if version != VERSION:
            raise DataFileError(
                f"{origin}: unsupported data file version {version!r} (this mend reads version {VERSION});"
                " re-run `mend run` to write it again"
            )
        problem = schema_problem(raw)
        if problem is not None:
            raise DataFileError(f"{origin}: malformed data file: {problem} (see the schema {SCHEMA_FILE.name})")
        try:
            return cls(
                root=str(raw.get("root", "")),
                tool=dict(raw.get("tool") or {}),
                runs=[_build(RunInfo, r) for r in raw.get("runs", [])],
                breaks=[_build(BreakSite, b) for b in raw.get("breaks", [])],
                recompiles=[_build(RecompileSite, r) for r in raw.get("recompiles", [])],
                regions=[_build(Region, r) for r in raw.get("regions", [])],
                tests={str(k): dict(v) for k, v in (raw.get("tests") or {}).items()},
                repaired=[dict(m) for m in raw.get("repaired") or []],
            )
        except (TypeError, ValueError, AttributeError) as exc:
            raise DataFileError(f"{origin}: malformed data file: {exc}") from exc

    # -- merging -----------------------------------------------------------------------------------
    def merge(self, other: RunData) -> RunData:
        """Combine two runs (``mend run --append``): counts add up, sites are matched by key."""
        merged = RunData(root=self.root or other.root, tool=self.tool or other.tool)
        merged.runs = [*self.runs, *other.runs]
        merged.breaks = _merge_sites(self.breaks, other.breaks)
        merged.recompiles = _merge_sites(self.recompiles, other.recompiles)
        regions: dict[str, Region] = {}
        for region in [*self.regions, *other.regions]:
            have = regions.get(region.id)
            if have is None:
                regions[region.id] = Region(**asdict(region))
            else:
                for name in ("graphs", "compiles", "recompiles", "frame_skips", "breaks", "compile_time_s"):
                    setattr(have, name, getattr(have, name) + getattr(region, name))
        merged.regions = list(regions.values())
        merged.tests = {**self.tests}
        merged.repaired = list({m["path"]: m for m in [*self.repaired, *other.repaired]}.values())
        for test, counts in other.tests.items():
            have = merged.tests.setdefault(test, {})
            for k, v in counts.items():
                have[k] = have.get(k, 0) + v
        return merged


def _merge_sites(left: list[Any], right: list[Any]) -> list[Any]:
    out: dict[Any, Any] = {}
    for site in [*left, *right]:
        have = out.get(site.key)
        if have is None:
            out[site.key] = type(site)(**asdict(site))
            continue
        have.count += site.count
        for name in ("regions", "tests"):
            values = getattr(have, name)
            values.extend(v for v in getattr(site, name) if v not in values)
        if getattr(site, "frame_skip", False):
            have.frame_skip = True
        if getattr(site, "limit_hit", False):
            have.limit_hit = True
    return list(out.values())


def _build(cls: type, raw: Any) -> Any:
    if cls is RunInfo and isinstance(raw, dict) and raw.get("status") not in (None, RUNNING, RETURNED, FINISHED):
        raise ValueError(f"RunInfo.status must be {RUNNING}, {RETURNED} or {FINISHED}, got {raw.get('status')!r}")
    if not isinstance(raw, dict):
        raise ValueError(f"{cls.__name__} entry must be an object, got {type(raw).__name__}")
    known = {f.name for f in fields(cls)}
    missing = [f.name for f in fields(cls) if f.name in _REQUIRED.get(cls.__name__, ()) and f.name not in raw]
    if missing:
        raise ValueError(f"{cls.__name__} entry lacks {', '.join(missing)}")
    obj = cls(**{k: int(v) if isinstance(v, float) and k in _INTEGERS and v.is_integer() else v
                 for k, v in raw.items() if k in known})
    for name in ("line", "count", "function_line"):
        if hasattr(obj, name) and not isinstance(getattr(obj, name), int):
            raise ValueError(f"{cls.__name__}.{name} must be an integer, got {getattr(obj, name)!r}")
    return obj


_INTEGERS = frozenset({"line", "count", "function_line", "graphs", "compiles", "recompiles", "frame_skips", "breaks",
                       "exit_code", "children", "unobserved_children"})
_REQUIRED = {
    "BreakSite": ("path", "line", "function", "gb_type", "registry_id", "message"),
    "RecompileSite": ("path", "line", "function", "kind"),
    "Region": ("id", "path", "line", "function"),
}


# --------------------------------------------------------------------------------------------------
# the schema
# --------------------------------------------------------------------------------------------------
SCHEMA_KEYWORDS = frozenset({"$schema", "$id", "$defs", "$ref", "title", "description", "type", "const", "enum",
                             "required", "properties", "additionalProperties", "items", "prefixItems",
                             "minimum"})
_TYPES = {"object": "an object", "array": "an array", "string": "a string", "integer": "an integer",
          "number": "a number", "boolean": "true or false", "null": "null"}


@functools.lru_cache(maxsize=1)
def schema() -> dict[str, Any]:
    """The published JSON Schema of the data file."""
    return json.loads(SCHEMA_FILE.read_text(encoding="utf-8"))


def schema_problem(raw: Any) -> str | None:
    """The first way ``raw`` breaks the schema (``breaks[0].path must be a string, got 3``), or None.

    A small reader of the keywords in :data:`SCHEMA_KEYWORDS` (the ones the schema uses), so that
    ``report`` and ``gate`` need no JSON Schema library."""
    root = schema()
    return _problem(raw, root, "the file", root)


def _problem(value: Any, rule: dict[str, Any], where: str, root: dict[str, Any]) -> str | None:
    if "$ref" in rule:
        name = rule["$ref"].rpartition("/")[2]
        return _problem(value, root["$defs"][name], where, root)
    if "const" in rule and not _equal(value, rule["const"]):
        return f"{where} must be {json.dumps(rule['const'])}, got {_show(value)}"
    if "enum" in rule and not any(_equal(value, choice) for choice in rule["enum"]):
        return f"{where} must be one of {', '.join(json.dumps(c) for c in rule['enum'])}, got {_show(value)}"
    types = rule.get("type")
    if types is not None:
        types = [types] if isinstance(types, str) else types
        if not any(_is(value, t) for t in types):
            return f"{where} must be {' or '.join(_TYPES[t] for t in types)}, got {_show(value)}"
    if "minimum" in rule and _is(value, "number") and value < rule["minimum"]:
        return f"{where} must be at least {rule['minimum']}, got {_show(value)}"
    if isinstance(value, dict):
        return _object_problem(value, rule, where, root)
    if isinstance(value, list):
        prefix = rule.get("prefixItems", [])
        for i, item in enumerate(value):
            sub = prefix[i] if i < len(prefix) else rule.get("items")
            problem = _problem(item, sub, f"{where}[{i}]", root) if sub is not None else None
            if problem:
                return problem
    return None


def _object_problem(value: dict[str, Any], rule: dict[str, Any], where: str, root: dict[str, Any]) -> str | None:
    prefix = "" if where == "the file" else f"{where}."
    for key in rule.get("required", []):
        if key not in value:
            return f"{where} lacks {key}"
    properties = rule.get("properties", {})
    extra = rule.get("additionalProperties", True)
    for key, item in value.items():
        sub = properties.get(key, extra)
        if sub is False:
            return f"{prefix}{key} is not allowed"
        if isinstance(sub, dict):
            problem = _problem(item, sub, f"{prefix}{key}", root)
            if problem:
                return problem
    return None


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return a == b


def _is(value: Any, kind: str) -> bool:
    """JSON Schema's types: ``true`` is not a number, ``1.0`` is an integer."""
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or \
            (isinstance(value, float) and value.is_integer())
    if kind == "number":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    return isinstance(value, {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}[kind])


def _show(value: Any) -> str:
    text = json.dumps(value)
    return text if len(text) <= 40 else text[:37] + "..."


def load(path: str | os.PathLike[str]) -> RunData:
    """Read a data file. Raises :class:`DataFileError` with a clear message on any problem."""
    p = Path(path)
    if not p.exists():
        raise DataFileError(f"no data file at {p}; run `mend run SCRIPT` (or `pytest --mend`) first")
    try:
        data, _ = read_file(p, MAX_DATA_BYTES)
    except NotRegular as exc:
        raise DataFileError(f"{p} is not a data file: {exc.strerror}") from exc
    except OSError as exc:
        raise DataFileError(f"cannot read {p}: {exc.strerror or exc}") from exc
    try:
        raw = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise DataFileError(f"cannot read {p}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise DataFileError(f"{p} is not valid JSON ({exc.msg} at line {exc.lineno}); re-run `mend run`") from exc
    except RecursionError:
        raise DataFileError(f"{p} is nested too deeply to be a data file") from None
    try:
        return RunData.from_dict(raw, origin=str(p))
    except RecursionError:
        raise DataFileError(f"{p} is nested too deeply to be a data file") from None


def save(data: RunData, path: str | os.PathLike[str], append: bool = False) -> RunData:
    """Write ``data`` atomically (a crash never leaves half a file). With ``append``, merge first.

    Returns what was written. An existing file that cannot be read is an error with ``append``
    (nothing is lost); without ``append`` it is replaced. The read, merge and write hold the data file's
    folder locked, so concurrent ``--append`` runs lose nothing; a run already in the file (by its ``id``:
    the ``running`` record written before the program started) is replaced by its new record.
    """
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with folder_lock(p.parent):
        if append and p.exists():
            ids = {r.id for r in data.runs if r.id}
            old = load(p)
            old.runs = [r for r in old.runs if not (r.id and r.id in ids)]
            data = old.merge(data)
        _write(p, data)
    return data


def _write(p: Path, data: RunData) -> None:
    fd, tmp = tempfile.mkstemp(prefix=p.name + ".", suffix=".tmp", dir=p.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data.to_dict(), fh, indent=1, sort_keys=False)
            fh.write("\n")
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def update_run(path: str | os.PathLike[str], info: RunInfo, root: str = "") -> RunData:
    """Replace the record of run ``info.id`` in the data file by ``info`` (added when the file lacks it, or
    written anew when the file is gone or unreadable), under the folder lock; returns what was written."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    with folder_lock(p.parent):
        try:
            data = load(p)
        except DataFileError:
            data = RunData(root=root)
        data.runs = [info if r.id == info.id else r for r in data.runs]
        if not any(r.id == info.id for r in data.runs):
            data.runs.append(info)
        _write(p, data)
    return data


def find_run(data: RunData, run_id: str) -> RunInfo | None:
    return next((r for r in data.runs if r.id == run_id), None)


def resolve(data: RunData, path: str) -> Path:
    """The absolute path of a site path stored in ``data``."""
    p = Path(path)
    return p if p.is_absolute() else Path(data.root or ".") / p
