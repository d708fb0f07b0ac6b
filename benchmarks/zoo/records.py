"""The zoo's records and its result file (versioned JSON, no torch import).

One :class:`Record` per (row, source): build status, graphs, break sites with Dynamo's reason and its class,
recompiles, how the compiled output compares with eager, and (for repaired sources) how the eager output
compares with the original's. A result file holds every record plus what produced them::

    {"schema": "mend-zoo", "version": 3, "created": ISO-8601, "command": [...],
     "settings": {"dtype": "fp32", "profile": "tiny", "backend": "eager", "timeout": 300, "jobs": 2},
     "versions": {"transformers": ..., "torch": ..., "mend": ..., "python": ...},
     "sources": {"original": Source, "safe": Source, ...},      # where each source's package is, fix summary
     "wall_s": 1234.5,
     "records": [Record...]}

Version 2 added ``Record.lines`` (the package lines the eager forward ran); version 1 files still load,
with ``lines`` None (not recorded). Version 3 added the mode (``eval``/``train``), the suite, what a training
step left (loss kind, backward graphs, compiled gradients against eager, the random-number state) and the
messages each phase emitted (:mod:`benchmarks.zoo.observe`) with their comparison against the original source;
older files load as eval rows of the transformers suite without messages.
"""

from __future__ import annotations

import gzip
import json
import os
import tempfile
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any


def in_package(path: str) -> bool:
    """A recorded path inside the package's own files (the zoo records those relative to it)."""
    return bool(path) and not path.startswith(("/", "<")) and path.endswith(".py")

SCHEMA = "mend-zoo"
VERSION = 3
READABLE_VERSIONS = (1, 2, 3)  # older files load; fields they lack take their defaults

# a row's status in one source; "runs" means the eager forward ran
OK = "ok"  # eager and compiled forward ran
COMPILE_ERROR = "compile-error"  # eager ran, torch.compile raised
BUILD_ERROR = "build-error"  # config or model construction failed
INPUT_ERROR = "input-error"  # no inputs could be generated
EAGER_ERROR = "eager-error"  # the eager forward raised
DTYPE_UNSUPPORTED = "dtype-unsupported"  # a CPU kernel is missing for the dtype (fp16/bf16 on the CPU)
MISSING_DEPENDENCY = "missing-dependency"  # the model needs a package the environment lacks (timm, natten...)
TIMEOUT = "timeout"
CRASH = "crash"  # the worker process died
WRONG_SOURCE = "wrong-source"  # the worker imported another transformers than the source's
STATUSES = (OK, COMPILE_ERROR, BUILD_ERROR, INPUT_ERROR, EAGER_ERROR, DTYPE_UNSUPPORTED, MISSING_DEPENDENCY,
            TIMEOUT, CRASH, WRONG_SOURCE)
RUNS = (OK, COMPILE_ERROR)


class ResultFileError(Exception):
    """A result file that is missing, not JSON, or of another schema or version."""


@dataclass
class Break:
    """One break site Dynamo recorded (a frame skip included)."""

    path: str  # relative to the transformers package ("models/bert/modeling_bert.py") when inside it
    line: int
    function: str
    gb_type: str
    registry_id: str | None
    reason: str  # Dynamo's explanation
    reason_class: str  # benchmarks.zoo.reasons.CLASSES
    count: int = 1
    frame_skip: bool = False
    source_line: str = ""

    @property
    def site(self) -> str:
        return f"{self.path}:{self.line}"


@dataclass
class Recompile:
    path: str
    line: int
    function: str
    kind: str
    guard: str = ""
    count: int = 1


@dataclass
class Record:
    name: str  # "phi3" or "phi3:longrope"
    model_type: str
    variant: str
    source: str  # "original", "safe", "unsafe"
    dtype: str = "fp32"
    profile: str = "tiny"
    status: str = OK
    error: str = ""  # the last line of the error (status != ok), or of the compile error
    model_class: str = ""
    params: int | None = None  # parameters of the built model
    transformers: str = ""  # the package folder the worker imported
    graphs: int | None = None
    breaks: list[Break] = field(default_factory=list)
    recompiles: list[Recompile] = field(default_factory=list)
    traced: list[list[Any]] = field(default_factory=list)  # [path, first line, last line, function] Dynamo traced
    # the package's lines the first eager forward ran, {path: [[first, last], ...]} (benchmarks.zoo.lines);
    # None: not recorded (a version-1 file, or a row that did not reach the eager forward)
    lines: dict[str, list[list[int]]] | None = None
    eager_deterministic: bool | None = None  # two eager runs gave the same bits
    compiled_max_abs_diff: float | None = None
    compiled_matches: bool | None = None  # compiled output within tolerance of eager
    outputs: str = ""  # .pt file with the flattened eager and compiled outputs
    eager_same: bool | None = None  # repaired sources: eager output bit-identical to the original's
    eager_max_abs_diff: float | None = None
    eager_note: str = ""  # why the comparison is missing or what differs (shape, count, dtype)
    seconds: dict[str, float] = field(default_factory=dict)  # build, inputs, eager, compile, total
    mode: str = "eval"  # "eval": forward under no_grad; "train": train(), forward, loss, backward
    note: str = ""  # how the row was made where it matters (a training head that did not build...)
    compiled_note: str = ""  # what differs first between the compiled and the eager step
    # training rows
    loss_kind: str = ""  # "labels": the model's own loss; "outputs": the mean square of the outputs
    backward_graphs: int | None = None  # backward graphs AOTAutograd compiled
    compiled_grads_max_abs_diff: float | None = None
    compiled_grads_match: bool | None = None  # compiled gradients within tolerance of eager's
    rng: str = ""  # digest of every random-number state after the first eager step (benchmarks.zoo.train.rng_digest)
    rng_same: bool | None = None  # repaired sources: the same digest as the original's
    # messages each phase emitted ("eager", "compiled"): [kind, name, level, text] (benchmarks.zoo.observe);
    # {}: not observed (files before version 3)
    messages: dict[str, list[list[str]]] | None = field(default_factory=dict)
    # repaired sources: per phase, the MessageDiff against the original's same phase (kept, lost, added...)
    messages_diff: dict[str, dict[str, Any]] = field(default_factory=dict)
    # where the messages differed in the shared workers: that diff, kept here, while ``messages_diff`` holds the
    # comparison of the row run again, the original and this source each in a fresh process (a once-per-process
    # message shows only in the first row a worker serves: benchmarks.zoo.runner.recheck_messages)
    messages_shared_diff: dict[str, dict[str, Any]] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        """(row, mode): what a record is compared across sources by."""
        return (self.name, self.mode)

    @property
    def messages_ok(self) -> bool | None:
        """No message lost, added or reordered in any phase (None: not compared)."""
        if not self.messages_diff:
            return None
        return all(not (d["lost"] or d["added"] or d["reordered"]) for d in self.messages_diff.values())

    @property
    def runs(self) -> bool:
        return self.status in RUNS

    @property
    def break_count(self) -> int:
        """Distinct break sites (frame skips included)."""
        return len(self.breaks)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Record:
        known = {f.name for f in fields(cls)}
        data = {k: v for k, v in d.items() if k in known}
        data["breaks"] = [Break(**b) for b in d.get("breaks", [])]
        data["recompiles"] = [Recompile(**r) for r in d.get("recompiles", [])]
        return cls(**data)


@dataclass
class FixSummary:
    """What ``mend fix`` did to a source's copy of the package."""

    seconds: float = 0.0
    files: int = 0
    changed: int = 0
    changed_files: list[str] = field(default_factory=list)
    applied: int = 0
    remaining: int = 0
    errors: list[list[str]] = field(default_factory=list)  # [path, message]
    unparsable: list[str] = field(default_factory=list)  # changed files that do not parse
    second_run_changed: list[str] | None = None  # files a second `mend fix` would change (None: not checked)
    second_run_seconds: float | None = None
    scope: list[str] | None = None  # package-relative paths fixed; None: the whole package


@dataclass
class SourceInfo:
    name: str
    path: str  # the package folder (transformers/) the workers import
    pythonpath: str | None = None  # what goes first on PYTHONPATH; None: the installed package
    unsafe: bool | None = None
    key: str = ""
    fix: FixSummary | None = None


@dataclass
class Results:
    records: list[Record]
    sources: dict[str, SourceInfo] = field(default_factory=dict)
    settings: dict[str, Any] = field(default_factory=dict)
    versions: dict[str, str] = field(default_factory=dict)
    command: list[str] = field(default_factory=list)
    created: str = ""
    wall_s: float = 0.0

    def by(self, source: str, mode: str | None = None) -> dict[str, Record]:
        """The records of ``source`` by row (of one ``mode``; None: the first mode the results hold)."""
        mode = mode or (self.modes[0] if self.modes else "eval")
        return {r.name: r for r in self.records if r.source == source and r.mode == mode}

    @property
    def modes(self) -> list[str]:
        return list(dict.fromkeys(r.mode for r in self.records))

    def to_dict(self) -> dict[str, Any]:
        return {"schema": SCHEMA, "version": VERSION, "created": self.created, "command": self.command,
                "settings": self.settings, "versions": self.versions,
                "sources": {k: asdict(v) for k, v in self.sources.items()}, "wall_s": self.wall_s,
                "records": [r.to_dict() for r in self.records]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Results:
        if d.get("schema") != SCHEMA or d.get("version") not in READABLE_VERSIONS:
            raise ResultFileError(f"not a {SCHEMA} result of version {'/'.join(map(str, READABLE_VERSIONS))} "
                                  f"(schema {d.get('schema')!r}, version {d.get('version')!r})")
        sources = {}
        for k, v in d.get("sources", {}).items():
            fix = FixSummary(**v["fix"]) if v.get("fix") else None
            sources[k] = SourceInfo(**{**v, "fix": fix})
        return cls(records=[Record.from_dict(r) for r in d.get("records", [])], sources=sources,
                   settings=d.get("settings", {}), versions=d.get("versions", {}), command=d.get("command", []),
                   created=d.get("created", ""), wall_s=d.get("wall_s", 0.0))


def save(results: Results, path: str | os.PathLike[str]) -> None:
    """Write atomically (a reader never sees half a file)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name, suffix=".tmp")
    with os.fdopen(fd, "w") as f:
        json.dump(results.to_dict(), f, indent=1)
    os.replace(tmp, path)


def load(path: str | os.PathLike[str]) -> Results:
    """A result file, as ``--json`` wrote it or gzipped (the raw results kept in ``benchmarks/results``)."""
    try:
        raw = Path(path).read_bytes()
        data = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    except (OSError, ValueError) as exc:
        raise ResultFileError(f"cannot read {path}: {exc}") from exc
    return Results.from_dict(data)
