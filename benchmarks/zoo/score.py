"""Score ``mend check`` against the break sites the model zoo recorded.

    python -m benchmarks.zoo.score zoo.json -j 2 [--package DIR] [--source original] [--format json]

The zoo (:mod:`benchmarks.zoo`) runs every transformers model type under ``torch.compile`` with mend's
recorder and keeps, per row, every break site (path inside the package, line, Dynamo's reason and its
class, whether the frame was skipped) and the functions Dynamo traced. This module runs ``mend check``
on the package the zoo ran (the static analyzer reads it from disk; torch is never imported) and
compares:

* a **recorded site** is a distinct (file, line) of the package's own files where Dynamo broke the
  graph or skipped the frame on at least one row of the chosen source;
* a **finding** is a break-predicting diagnostic of ``mend check`` (recompile rules, MND4xx, and
  mend's own MND9xx are left out); it is **judged** when a line it names ran on some row: a line of its
  span, or for a frame-skip finding the inner break's line (the zoo records, per row, the package's lines
  the eager forward ran; for records without them, a version-1 file, and for rows whose compiled run
  raised part way, the functions Dynamo traced stand in). A finding on lines no row ran cannot be confirmed either way: it is listed as *not judged*. So
  are lines a row ran only after Dynamo skipped their frame (a frame-skip break earlier in the same
  function that Dynamo did not resume after: the rest of that call ran eagerly, unobserved), and
  findings for a mode no row runs (training, flash/flex attention, a dtype other than the zoo's);
* a finding **confirms** a site when the site's line lies in the finding's span (first to last line
  of the reported node) widened by ``tolerance`` lines either side (0: the span itself, the rule of
  ``mend crosscheck``'s model runs); a frame-skip finding (a break inside ``try``, a loop or a user
  ``with``, MND505/506/508) is reported on the statement's header and predicts the break at the inner
  line it names, which is the line Dynamo records; when that inner line is a call whose callee breaks,
  Dynamo records the skip at the callee's break (the innermost frame), so the finding also confirms a
  frame-skip site recorded there;
* **recall** = recorded sites some finding confirms / recorded sites;
* **precision** = judged findings that confirm a site / judged findings.

Everything below :func:`score` is pure data (no torch, no files), so the scorer is tested on small
synthetic records.
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import re
import sys
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks.zoo import records as R
from benchmarks.zoo.lines import from_ranges
from benchmarks.zoo.records import in_package

# codes that predict no graph break: recompile triggers and mend's own diagnostics
NON_BREAK_PREFIXES = ("MND4", "MND9")
# attention implementations no zoo row runs (on the CPU, transformers picks sdpa or eager)
UNRUN_ATTENTION = ("flash_attention", "flex_attention")


# torch dtypes as the zoo names them, for findings that hold only for one dtype
ZOO_DTYPES = {"float16": "fp16", "half": "fp16", "bfloat16": "bf16", "float32": "fp32", "float": "fp32",
              "float64": "fp64", "double": "fp64"}
DTYPE_TEST = re.compile(r"\.dtype==torch\.(\w+)|torch\.(\w+)==[\w.\[\]]+\.dtype")


def _tested_dtype(mode: str) -> str | None:
    """The zoo's name of the dtype a mode tests for equality (``h.dtype==torch.float16``: "fp16")."""
    m = DTYPE_TEST.search(mode)
    return ZOO_DTYPES.get(m.group(1) or m.group(2)) if m else None


class ZooScoreError(Exception):
    """A result file or package that cannot be scored; the message says why."""


@dataclass
class Site:
    """One recorded break site, merged over the rows that hit it."""

    path: str  # relative to the package root
    line: int
    reason_classes: list[str] = field(default_factory=list)
    gb_types: list[str] = field(default_factory=list)
    registry_ids: list[str] = field(default_factory=list)
    frame_skip: bool = False
    function: str = ""
    source_line: str = ""
    models: list[str] = field(default_factory=list)

    @property
    def reason_class(self) -> str:
        return self.reason_classes[0] if self.reason_classes else "other"


@dataclass(frozen=True)
class StaticFinding:
    path: str  # relative to the package root
    line: int
    end_line: int
    code: str
    mode: str = ""  # the mode the finding depends on (``self.training``), from ``data["mode"]``
    inner_line: int = 0  # a frame-skip finding (a break inside try/loop/with): the line of that break
    # a frame-skip finding about a call that breaks: where the callee breaks (package-relative path, line)
    break_path: str = ""
    break_line: int = 0

    def unrun_mode(self, dtype: str = "fp32", run_mode: str = "eval") -> bool:
        """The reported code runs only in a mode the rows did not run: training when they ran in eval mode
        (``self.training``; "not self.training" the other way round), a flash/flex attention implementation
        (the zoo runs eager and sdpa attention), or a test for a dtype other than the zoo's
        (``h.dtype == torch.float16`` in an fp32 zoo)."""
        mode = self.mode.replace(" ", "")
        if mode.startswith("self.training") and run_mode != "train":
            return True
        if mode.startswith(("notself.training", "(notself.training")) and run_mode == "train":
            return True
        if any(m in mode for m in UNRUN_ATTENTION):
            return True
        tested = _tested_dtype(mode)
        return tested is not None and tested != dtype


@dataclass
class ZooScore:
    sites: list[Site]
    findings: list[StaticFinding]  # every break-predicting finding in the package
    judged: list[StaticFinding]  # the findings inside functions Dynamo traced
    confirmed: list[StaticFinding]  # judged findings that cover a recorded site
    found: list[Site]  # recorded sites a finding covers
    tolerance: int = 0
    dtype: str = "fp32"  # the dtype the zoo ran its rows in
    rows: int = 0  # rows of the source that ran (eager and compile)
    rows_with_lines: int = 0  # of those, rows that recorded the lines they ran (the others: traced functions)
    package: str = ""
    check_seconds: float = 0.0

    @property
    def missed(self) -> list[Site]:
        got = {(s.path, s.line) for s in self.found}
        return [s for s in self.sites if (s.path, s.line) not in got]

    @property
    def unconfirmed(self) -> list[StaticFinding]:
        ok = set(self.confirmed)
        return [f for f in self.judged if f not in ok]

    @property
    def not_judged(self) -> list[StaticFinding]:
        """Findings on lines no row ran (or for a mode no row runs): neither confirmed nor refuted."""
        judged = set(self.judged)
        return [f for f in self.findings if f not in judged]

    @property
    def recall(self) -> float:
        return len(self.found) / len(self.sites) if self.sites else 1.0

    @property
    def precision(self) -> float:
        return len(self.confirmed) / len(self.judged) if self.judged else 1.0

    def by_rule(self) -> list[tuple[str, int, int, int, int]]:
        """(code, findings, judged, confirmed, sites found) per rule."""
        codes = sorted({f.code for f in self.findings})
        rows = []
        for code in codes:
            judged = [f for f in self.judged if f.code == code]
            conf = [f for f in self.confirmed if f.code == code]
            sites = {(s.path, s.line) for s in self.found
                     if any(_covers(f, s, self.tolerance) for f in conf)}
            rows.append((code, sum(f.code == code for f in self.findings), len(judged), len(conf), len(sites)))
        return rows

    def by_reason(self) -> list[tuple[str, int, int]]:
        """(reason class, recorded sites, sites found) per Dynamo reason class."""
        got = {(s.path, s.line) for s in self.found}
        classes = sorted({s.reason_class for s in self.sites})
        return [(c, sum(s.reason_class == c for s in self.sites),
                 sum(s.reason_class == c and (s.path, s.line) in got for s in self.sites)) for c in classes]

    def to_dict(self) -> dict[str, Any]:
        return {
            "precision": round(self.precision, 4), "recall": round(self.recall, 4), "tolerance": self.tolerance,
            "package": self.package, "rows": self.rows, "rows_with_lines": self.rows_with_lines,
            "check_seconds": round(self.check_seconds, 2),
            "recorded_sites": len(self.sites), "sites_found": len(self.found),
            "findings": len(self.findings), "judged_findings": len(self.judged),
            "confirmed_findings": len(self.confirmed), "unjudged_findings": len(self.findings) - len(self.judged),
            "by_rule": [dict(zip(("code", "findings", "judged", "confirmed", "sites"), r)) for r in self.by_rule()],
            "by_reason": [dict(zip(("reason_class", "sites", "found"), r)) for r in self.by_reason()],
            "missed": [asdict(s) for s in self.missed],
            "unconfirmed": [asdict(f) for f in self.unconfirmed],
            "not_judged": [asdict(f) for f in self.not_judged],
        }


# --------------------------------------------------------------------------------------------------
# the scoring itself: pure data


def collect_sites(records: Iterable[Any]) -> list[Site]:
    """The distinct break sites of ``records`` in the package's own files, merged over rows."""
    sites: dict[tuple[str, int], Site] = {}
    for rec in records:
        for b in rec.breaks:
            if not in_package(b.path):
                continue
            s = sites.get((b.path, b.line))
            if s is None:
                s = sites[(b.path, b.line)] = Site(b.path, b.line, function=b.function, source_line=b.source_line)
            for values, value in ((s.reason_classes, b.reason_class), (s.gb_types, b.gb_type),
                                  (s.registry_ids, b.registry_id or "-"), (s.models, rec.name)):
                if value not in values:
                    values.append(value)
            s.frame_skip = s.frame_skip or b.frame_skip
    return sorted(sites.values(), key=lambda s: (s.path, s.line))


class TracedIndex:
    """The line ranges of the functions Dynamo traced, per file: is a line inside one of them?"""

    def __init__(self, records: Iterable[Any]) -> None:
        ranges: dict[str, list[tuple[int, int]]] = {}
        for rec in records:
            for path, first, last, _fn in rec.traced:
                if in_package(path):
                    ranges.setdefault(path, []).append((int(first), int(last)))
        self._merged = {p: _merge(r) for p, r in ranges.items()}
        self._starts = {p: [a for a, _ in r] for p, r in self._merged.items()}

    def contains(self, path: str, first: int, last: int | None = None) -> bool:
        """Some line of ``first..last`` is inside a traced function of ``path``."""
        merged = self._merged.get(path)
        if not merged:
            return False
        last = first if last is None else last
        i = bisect.bisect_right(self._starts[path], last) - 1
        return i >= 0 and merged[i][1] >= first


class RanIndex:
    """Which package lines ran on some row where Dynamo could see them: the recorded eager lines
    (``Record.lines``), or, for a record without them, every line of the functions Dynamo traced on it;
    less, on each row, the lines after a frame skip in the same function that Dynamo did not resume
    after (that call then ran eagerly, from start to end, unobserved)."""

    def __init__(self, records: Iterable[Any]) -> None:
        records = list(records)
        self.rows = [_RowLines(r) for r in records]
        self.by_path: dict[str, list[_RowLines]] = {}
        for row in self.rows:
            for path in row.paths():
                self.by_path.setdefault(path, []).append(row)
        self.by_lines = sum(row.lines is not None for row in self.rows)

    def ran(self, path: str, first: int, last: int | None = None) -> bool:
        """Some line of ``first..last`` ran, unshadowed, on some row."""
        last = first if last is None else last
        return any(row.ran(path, n) for row in self.by_path.get(path, ()) for n in range(first, last + 1))

    def ran_both(self, path: str, line: int, other_path: str, other_line: int) -> bool:
        """``line`` of ``path`` and ``other_line`` of ``other_path`` ran on one row."""
        return any(row.ran(path, line) and row.ran(other_path, other_line) for row in self.by_path.get(path, ()))


class _RowLines:
    """One row's lines: those it ran (or its traced functions' lines) and those a frame skip hid."""

    def __init__(self, rec: Any) -> None:
        raw = getattr(rec, "lines", None)
        failed = getattr(rec, "status", "") == R.COMPILE_ERROR
        if failed:  # Dynamo raised part way, at a line the record does not keep: nothing of the row is judged
            raw = {}
        self.lines = None if raw is None else {p: set(from_ranges(r)) for p, r in raw.items() if in_package(p)}
        traced = [] if failed else [(p, int(a), int(b), fn) for p, a, b, fn in rec.traced if in_package(p)]
        self.traced: dict[str, list[tuple[int, int]]] = {}
        for p, a, b, _fn in traced:
            self.traced.setdefault(p, []).append((a, b))
        self.hidden: dict[str, list[tuple[int, int]]] = {}
        for b in rec.breaks:
            hidden = _after_skip(b, traced) if b.frame_skip and in_package(b.path) else None
            if hidden is not None:
                self.hidden.setdefault(b.path, []).append(hidden)

    def paths(self) -> set[str]:
        return set(self.lines) if self.lines is not None else set(self.traced)

    def ran(self, path: str, n: int) -> bool:
        if any(a <= n <= b for a, b in self.hidden.get(path, ())):
            return False
        if self.lines is not None:
            return n in self.lines.get(path, ())
        return any(a <= n <= b for a, b in self.traced.get(path, ()))


def _after_skip(b: Any, traced: list[tuple[str, int, int, str]]) -> tuple[int, int] | None:
    """The lines of ``b``'s function after the frame-skip break ``b``, when Dynamo did not resume after
    it there (no ``torch_dynamo_resume_in_<fn>_at_<line>`` traced): they ran in eager only."""
    resumed = f"_at_{b.line}"
    if any(p == b.path and fn.startswith("torch_dynamo_resume_in_") and fn.endswith(resumed)
           for p, _a, _b, fn in traced):
        return None
    around = [(a, z) for p, a, z, fn in traced if p == b.path and fn == b.function and a <= b.line <= z]
    if not around:
        return None
    a, z = min(around, key=lambda r: r[1] - r[0])  # the innermost function of that name
    return (b.line + 1, z) if b.line < z else None


def _merge(ranges: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[tuple[int, int]] = []
    for a, b in sorted(ranges):
        if out and a <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], b))
        else:
            out.append((a, b))
    return out


def _covers(f: StaticFinding, s: Site, tolerance: int) -> bool:
    """``f`` predicts a break at ``s``: its span (or, for a frame skip, the inner break's line) holds the
    site; or ``f`` is a frame skip through a call and ``s`` the frame skip recorded at the callee's break."""
    if f.break_line and s.frame_skip and f.break_path == s.path and abs(f.break_line - s.line) <= tolerance:
        return True
    if f.path != s.path:
        return False
    if f.inner_line and abs(f.inner_line - s.line) <= tolerance:
        return True
    return f.line - tolerance <= s.line <= f.end_line + tolerance


def score(records: list[Any], findings: Iterable[StaticFinding], tolerance: int = 0, dtype: str = "fp32",
          run_mode: str = "eval") -> ZooScore:
    """Score break-predicting ``findings`` (paths relative to the package) against ``records``, which
    ran in ``dtype`` and ``run_mode`` (a finding "(only when self.training)" is judged on training rows)."""
    records = [r for r in records if getattr(r, "runs", True)]
    sites = collect_sites(records)
    ran = RanIndex(records)
    findings = sorted({f for f in findings if not f.code.startswith(NON_BREAK_PREFIXES)},
                      key=lambda f: (f.path, f.line, f.code))
    by_path: dict[str, list[Site]] = {}
    for s in sites:
        by_path.setdefault(s.path, []).append(s)

    def confirms(f: StaticFinding) -> bool:
        near = by_path.get(f.path, [])
        if f.break_path and f.break_path != f.path:
            near = near + by_path.get(f.break_path, [])
        return any(_covers(f, s, tolerance) for s in near)

    judged = [f for f in findings if (not f.unrun_mode(dtype, run_mode) and _ran(f, ran)) or confirms(f)]
    confirmed = [f for f in judged if confirms(f)]
    found = [s for s in sites if any(_covers(f, s, tolerance) for f in confirmed)]
    return ZooScore(sites, findings, judged, confirmed, found, tolerance, dtype, rows=len(records),
                    rows_with_lines=ran.by_lines)


def _ran(f: StaticFinding, ran: RanIndex) -> bool:
    """A line ``f`` names ran: for a frame skip through a call, the call and the callee's break line on one row
    (where the break line did not run with the call, the callee did not break there and the frame was not
    skipped: nothing to judge); for another frame-skip finding the inner break's line; else a line of its
    span."""
    if f.inner_line and f.break_path and f.break_line:
        return ran.ran_both(f.path, f.inner_line, f.break_path, f.break_line)
    if f.inner_line:
        return ran.ran(f.path, f.inner_line)
    return ran.ran(f.path, f.line, f.end_line)


# --------------------------------------------------------------------------------------------------
# the inputs: a result file, the package on disk, mend check


def load_records(results_file: str | os.PathLike[str], source: str = "original") -> tuple[list[Any], dict[str, Any]]:
    """The records of ``source`` in a zoo result file, and the file's versions and sources."""
    try:
        results = R.load(results_file)
    except R.ResultFileError as exc:
        raise ZooScoreError(str(exc)) from None
    recs = [r for r in results.records if r.source == source]
    if not recs:
        have = sorted({r.source for r in results.records})
        raise ZooScoreError(f"{results_file}: no records of source {source!r} (it has: {', '.join(have) or 'none'})")
    info = {"versions": results.versions, "source_path": getattr(results.sources.get(source), "path", ""),
            "dtype": str(results.settings.get("dtype", "fp32"))}
    return recs, info


def installed_package() -> Path:
    """The folder of the installed transformers, found without importing it."""
    import importlib.util

    spec = importlib.util.find_spec("transformers")
    if spec is None or not spec.submodule_search_locations:
        raise ZooScoreError("transformers is not installed; pass --package DIR")
    return Path(next(iter(spec.submodule_search_locations)))


def installed_version(package: Path) -> str | None:
    init = package / "__init__.py"
    try:
        for line in init.read_text().splitlines():
            if line.startswith("__version__"):
                return line.split("=", 1)[1].strip().strip("\"'")
    except OSError:
        return None
    return None


def check_package(package: Path, jobs: int | None = None, cache_dir: Path | None = None,
                  paths: list[Path] | None = None) -> tuple[list[StaticFinding], float]:
    """``mend check`` over the whole package, or over ``paths`` inside it (isolated settings); findings
    relative to ``package``."""
    from mend.analyzers.static import check_paths, load_config

    targets = [str(p) for p in (paths or [package])]
    config = load_config(targets, isolated=True)
    if cache_dir is not None:
        config = config.with_overrides(cache_dir=cache_dir)
    result = check_paths(targets, config, jobs=jobs, use_cache=cache_dir is not None)
    return findings_of(result.diagnostics, package), result.seconds


def findings_of(diagnostics: Iterable[Any], package: Path | str) -> list[StaticFinding]:
    """``mend check``'s diagnostics as findings relative to ``package`` (with the callee's break of a frame skip
    through a call)."""
    root = os.path.realpath(package)
    out = []
    for d in diagnostics:
        brk = _relative(str(d.data["break_path"]), root) if d.data.get("break_path") else ""
        brk = "" if brk.startswith("../") else brk  # a break outside the package: no recorded site
        out.append(StaticFinding(_relative(d.path, root), d.line, d.end_line or d.line, d.code,
                                 str(d.data.get("mode", "")), int(d.data.get("inner_line", 0) or 0),
                                 brk, int(d.data.get("break_line", 0) or 0) if brk else 0))
    return out


def _relative(path: str, root: str) -> str:
    return os.path.relpath(os.path.realpath(os.path.abspath(path)), root).replace(os.sep, "/")


def run(results_file: str | os.PathLike[str], package: Path | None = None, source: str = "original",
        tolerance: int = 0, jobs: int | None = None, cache_dir: Path | None = None) -> ZooScore:
    records, info = load_records(results_file, source)
    package = package or installed_package()
    if not (package / "__init__.py").is_file():
        raise ZooScoreError(f"{package} is not a package folder")
    want = info["versions"].get("transformers")
    have = installed_version(package)
    if want and have and want != have:
        raise ZooScoreError(f"the zoo ran transformers {want}, {package} is {have}: line numbers would not match")
    findings, seconds = check_package(package, jobs, cache_dir)
    result = score(records, findings, tolerance, info["dtype"])
    result.package, result.check_seconds = str(package), seconds
    return result


# --------------------------------------------------------------------------------------------------
# output


def render(result: ZooScore, limit: int | None = None) -> str:
    """The tables: by rule, by Dynamo reason class, the misses and the unconfirmed findings."""
    tol = "the finding's span" if result.tolerance == 0 else f"the finding's span +- {result.tolerance} line(s)"
    out = [f"mend check vs the zoo: {len(result.sites)} recorded break site(s) in the package's own files "
           f"({result.rows} rows), {len(result.findings)} break finding(s) of `mend check` on {result.package} "
           f"({result.check_seconds:.1f} s)",
           f"a finding confirms a site when the site's line is inside {tol}; precision is judged over findings "
           f"on lines that ran on some row ({_judging(result)})",
           "", "| rule | findings | judged | confirmed | precision | sites found |", "|---|---:|---:|---:|---:|---:|"]
    for code, n, judged, conf, sites in result.by_rule():
        prec = f"{conf / judged:.2f}" if judged else "-"
        out.append(f"| {code} | {n} | {judged} | {conf} | {prec} | {sites} |")
    out += ["", "| Dynamo reason class | sites | found | recall |", "|---|---:|---:|---:|"]
    for cls, n, got in result.by_reason():
        out.append(f"| {cls} | {n} | {got} | {got / n:.2f} |")
    missed = result.missed
    out += ["", f"missed ({len(missed)}):"]
    for s in missed[:limit]:
        skip = ", frame skipped" if s.frame_skip else ""
        out.append(f"  {s.path}:{s.line} [{s.reason_class}; {'/'.join(s.registry_ids)}{skip}] in {s.function}: "
                   f"{s.source_line.strip()[:90]}  ({', '.join(s.models[:3])}{' ...' if len(s.models) > 3 else ''})")
    unconf = result.unconfirmed
    out += ["", f"not confirmed ({len(unconf)} judged finding(s) on lines where no row broke):"]
    for f in unconf[:limit]:
        out.append(f"  {f.path}:{f.line} {f.code}")
    unjudged = result.not_judged
    training = [f for f in unjudged if f.unrun_mode(result.dtype)]
    unran = [f for f in unjudged if not f.unrun_mode(result.dtype)]
    out += ["", f"not judged ({len(unjudged)} finding(s), not counted): {len(unran)} on lines no row ran, "
                f"{len(training)} reported for a mode no row runs "
                f"(training: the zoo runs models in eval mode; flash/flex attention: it runs eager and sdpa; "
                f"dtype tests: it runs {result.dtype})"]
    for f in unran[:limit]:
        out.append(f"  {f.path}:{f.line} {f.code}")
    out += ["",
            f"precision {result.precision:.3f} ({len(result.confirmed)}/{len(result.judged)}), "
            f"recall {result.recall:.3f} ({len(result.found)}/{len(result.sites)})"]
    return "\n".join(out)


def _judging(result: ZooScore) -> str:
    if result.rows_with_lines == result.rows:
        return "the lines each row's eager forward ran"
    if not result.rows_with_lines:
        return "every line of the functions Dynamo traced: the records hold no executed lines"
    return (f"executed lines for {result.rows_with_lines} rows, the functions Dynamo traced for the other "
            f"{result.rows - result.rows_with_lines}")


def to_json(result: ZooScore) -> str:
    return json.dumps(result.to_dict(), indent=2)


def main(argv: list[str] | None = None) -> int:
    """Print the score; exit 0, or 2 when the result file or the package cannot be scored."""
    ap = argparse.ArgumentParser(prog="python -m benchmarks.zoo.score", description=__doc__.split("\n\n")[0])
    ap.add_argument("results", type=Path, help="a zoo result file (python -m benchmarks.zoo --json)")
    ap.add_argument("--package", type=Path, help="the package folder the zoo ran (default: the installed transformers)")
    ap.add_argument("--source", default="original", help="which source's records to score")
    ap.add_argument("--tolerance", type=int, default=0, help="lines either side of a finding's span that still "
                                                             "confirm a site")
    ap.add_argument("--jobs", "-j", type=int, help="worker processes of mend check")
    ap.add_argument("--cache-dir", type=Path, help="mend check's result cache (default: none, a cold run)")
    ap.add_argument("--limit", type=int, help="list at most this many misses and unconfirmed findings")
    ap.add_argument("--format", "-f", choices=("table", "json"), default="table")
    a = ap.parse_args(argv)
    try:
        result = run(a.results, a.package, a.source, a.tolerance, a.jobs, a.cache_dir)
    except ZooScoreError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(to_json(result) if a.format == "json" else render(result, a.limit))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
