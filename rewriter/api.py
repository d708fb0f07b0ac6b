"""``fix_paths``: ``mend fix`` as a library call (no torch import).

Files, configuration, noqa and compiled-region inference come from the static analyzer
(``mend.analyzers.static``: ``load_config``, ``discover_files``, ``check_paths``, ``check_source``),
so ``mend fix`` sees exactly what ``mend check`` reports. Runtime evidence (``--from-run``) comes from
the data file of ``mend run`` (``mend.analyzers.runtime.data``) mapped to rule codes by
``mend.analyzers.runtime.mapping``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.paths import within
from mend.analyzers.static import fixability
from mend.rewriter import files, workers
from mend.rewriter.fix_cache import FixCache, job_key
from mend.rewriter.helper_module import TreeModules, helper_import
from mend.rewriter.options import FixOptions
from mend.rewriter.results import FileResult, line_map, original_line


class FixError(Exception):
    """A ``mend fix`` run that cannot start (missing analyzer, bad data file); the message says why."""


@dataclass
class FixRun:
    files: list[FileResult] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (path, message)
    written: list[str] = field(default_factory=list)
    notes: list[tuple[str, str]] = field(default_factory=list)  # (path, message): skipped, not an error
    decisions: dict[str, dict[str, str | None]] = field(default_factory=dict)  # see analyzers.static.fixability

    @property
    def applied(self) -> int:
        return sum(len(f.applied) for f in self.files)

    @property
    def remaining(self) -> int:
        return sum(len(f.remaining) for f in self.files)

    @property
    def changed(self) -> list[FileResult]:
        return [f for f in self.files if f.changed and f.error is None]


def _static() -> Any:
    try:
        from mend.analyzers import static
    except ImportError as exc:  # pragma: no cover - the package is part of mend
        raise FixError(f"the static analyzer cannot be imported: {exc}") from exc
    missing = [n for n in ("load_config", "discover_files", "check_paths", "check_source") if not hasattr(static, n)]
    if missing:
        raise FixError(f"the static analyzer does not provide {', '.join(missing)} yet")
    return static


def options_from_config(raw: dict[str, Any], base: FixOptions, side_effects: str | None,
                        helpers: str | None = None) -> FixOptions:
    policy = side_effects or raw.get("side-effects") or raw.get("side_effects") or base.side_effects
    helpers = str(helpers or raw.get("helpers") or base.helpers)
    return FixOptions(unsafe=base.unsafe, side_effects=str(policy), torch_rng=base.torch_rng,
                      select=base.select, ignore=base.ignore, max_rounds=base.max_rounds, helpers=helpers,
                      target_torch=base.target_torch or _static().target_torch(raw))


def runtime_diagnostics(data_file: str | Path, paths: Sequence[Path],
                        files: Sequence[Path]) -> tuple[list[Diagnostic], list[tuple[str, str]]]:
    """Diagnostics for the project sites recorded in a ``mend run`` data file, each placed on the file
    under ``paths`` that holds it (``files``: the files discovered there), and a note for each site found
    under none of them. A recorded file outside ``paths`` (a run recorded on another checkout) is matched
    to the file under ``paths`` with the longest common path ending whose line holds the recorded text."""
    try:
        from mend.analyzers.runtime import data as rdata
        from mend.analyzers.runtime import mapping
    except ImportError as exc:
        raise FixError(f"the runtime data reader is not available: {exc}") from exc
    try:
        run = rdata.load(data_file)
    except Exception as exc:
        raise FixError(f"cannot read {data_file}: {exc}") from exc
    out: list[Diagnostic] = []
    notes: list[tuple[str, str]] = []
    sites: list[tuple[str, Any]] = [(mapping.code_for_break(b, run.root), b) for b in run.breaks]
    sites += [(mapping.code_for_recompile(r), r) for r in run.recompiles]
    for code, site in sites:
        if getattr(site, "in_library", False) or not code or code.startswith("MND9"):
            continue
        recorded = rdata.resolve(run, site.path)
        path = locate_site(recorded, site.line, site.source_line, paths, files)
        if path is None:
            where = f"`{site.source_line}` at line {site.line}" if site.source_line else f"line {site.line}"
            notes.append((f"{recorded}:{site.line}", f"{code} recorded by mend run: not found under "
                          f"{', '.join(str(p) for p in paths)} (no file there has {where}); not fixed"))
            continue
        out.append(Diagnostic(code=code, message=getattr(site, "message", "") or getattr(site, "reason", ""),
                              path=str(path), line=site.line, col=_indent(path, site.line), source="runtime"))
    return out, notes


def locate_site(recorded: Path, line: int, text: str, paths: Sequence[Path], files: Sequence[Path]) -> Path | None:
    """The file under ``paths`` that holds a site recorded at ``recorded:line`` (``text``: the line's recorded
    text, stripped; "" when unknown): ``recorded`` itself when it lies under ``paths``, else the one file
    of ``files`` whose path ends with the most components of ``recorded`` (the same relative place in a
    copy of the tree) and whose line ``line`` holds ``text``; None when there is none or several."""
    if recorded.is_file() and within(recorded, paths):
        return recorded
    best: list[Path] = []
    longest = 0
    for file in files:
        n = _common_ending(file.absolute().parts, recorded.parts)
        if n == 0 or n < longest or (text and _line_text(file, line) != text):
            continue
        best = [file] if n > longest else [*best, file]
        longest = n
    return best[0] if len(best) == 1 else None


def _common_ending(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[-1 - n] == b[-1 - n]:
        n += 1
    return n


def _line_text(path: Path, line: int) -> str | None:
    try:
        return files.read(path).text.splitlines()[line - 1].strip()
    except (files.FileProblem, IndexError):
        return None


def _indent(path: Path, line: int) -> int:
    """The 1-based column of the first character of ``line`` in ``path`` (1 when it cannot be read)."""
    try:
        text = files.read(path).text.splitlines()[line - 1]
    except (files.FileProblem, IndexError):
        return 1
    return len(text) - len(text.lstrip()) + 1


def fix_paths(
    paths: Sequence[str | Path],
    options: FixOptions,
    *,
    write: bool = True,
    side_effects: str | None = None,
    helpers: str | None = None,
    config_file: str | None = None,
    isolated: bool = False,
    from_run: str | Path | None = None,
    progress: Callable[[], None] | None = None,
    record: bool = True,
    jobs: int | None = None,
    use_cache: bool = True,
) -> FixRun:
    """Fix every file under ``paths`` the analyzer reports on; write back unless ``write`` is off.

    A file that cannot be read, repaired or written is reported in ``FixRun.errors`` and left as it is;
    the others are still fixed. A file reached through several paths (links) is fixed once.

    A finding is applied only to the bytes it was found in: each file is read, repaired and written while
    its folder is locked against other ``mend fix`` runs (:func:`mend.rewriter.files.locked`), and a file
    whose bytes differ from the ones the analysis read (edited meanwhile, or fixed by another run) is
    analysed again first (a note says so). A file whose analysis or repair runs past ``MEND_FILE_TIME_LIMIT``
    (:mod:`mend.deadline`) is an error, left as it is. Files that are not regular files are skipped with a note. With
    ``record``, what was decided for each finding is stored for ``mend check``
    (:mod:`mend.analyzers.static.fixability`).

    The repairs are computed first, in ``jobs`` worker processes (None: every core;
    :mod:`mend.rewriter.workers`), then each file is locked, compared and written here in order: the result is
    the same as with one process. With ``use_cache``, the analysis comes from ``mend check``'s cache and a file
    whose repair inputs are unchanged is not repaired again (:mod:`mend.rewriter.fix_cache`); ``progress`` is
    called once per file repaired."""
    static = _static()
    str_paths = [str(p) for p in paths]
    config = static.load_config(str_paths, config_file=config_file, isolated=isolated)
    raw = getattr(config, "raw", {}) or {}
    options = options_from_config(raw, options, side_effects, helpers)
    options = replace(options, helpers_within=tuple(str_paths))
    run = FixRun()
    given = [Path(p) for p in paths]
    targets = _inside(given, [Path(f) for f in static.discover_files(str_paths, config)], run)
    result = static.check_paths(str_paths, config, use_cache=use_cache, mark_fixes=False)
    analysed = {_key(p): d for p, d in getattr(result, "digests", {}).items()}
    sites: dict[str, list[Diagnostic]] = {}
    for d in result.diagnostics:
        sites.setdefault(_key(d.path), []).append(d)
    if from_run is not None:
        recorded, notes = runtime_diagnostics(from_run, given, targets)
        run.notes += notes
        known = {_key(f) for f in targets}
        for d in recorded:
            if _covered(d, sites.get(_key(d.path), [])):
                continue  # the static finding has the exact position: one line per site
            sites.setdefault(_key(d.path), []).append(d)
            if _key(d.path) not in known:
                targets.append(Path(d.path))
                known.add(_key(d.path))
    trees = TreeModules(write)
    run.notes += [(path, f"skipped: {why}") for path, why in getattr(result, "skipped", [])]
    run.errors += [(path, f"skipped: {why}; left unchanged") for path, why in getattr(result, "timed_out", [])]
    stopped = {_key(path) for path, _ in getattr(result, "timed_out", [])}

    project = [getattr(result, "project", None)]

    def ready() -> None:
        if project[0] is None:  # the analysis came from check's run cache, which holds no project index
            project[0] = static.check_paths(str_paths, config, use_cache=use_cache, need_project=True,
                                            mark_fixes=False).project

    def diagnose(text: str, display: str) -> list[Diagnostic]:
        ready()
        return list(static.check_source(text, display, config, project[0]))

    policy = side_effects or fixability.config_policy(raw)
    modes = [fixability.mode(options.unsafe, policy, options.target_torch)]
    if options.unsafe:  # what an unsafe run leaves, a safe run leaves too
        modes.append(fixability.mode(False, policy, options.target_torch))
    work = [(file, _unique(sites.get(_key(file), []))) for file in _once_each(targets, run)]
    work = [(file, diags) for file, diags in work if diags and _key(file) not in stopped]
    plan = _Planned(options, diagnose, FixCache(static.cache_dir_for(config) if use_cache else None), ready)
    plan.compute(work, analysed, jobs, progress)
    for file, diags in work:
        _fix_file(file, diags, plan, run, write, trees, modes, analysed.get(_key(file)))
    plan.cache.save()
    if record:
        fixability.record(static.cache_dir_for(config), run.decisions)
    return run


class _Planned:
    """The repairs of a run, computed before any file is written (in worker processes, or from the cache)."""

    def __init__(self, options: FixOptions, diagnose: workers.Diagnoser, cache: FixCache,
                 ready: Callable[[], None]) -> None:
        self.options = options
        self.diagnose = diagnose
        self.ready = ready  # builds what ``diagnose`` needs, once: before the workers start, they share it
        self.cache = cache
        self.outcomes: dict[str, tuple[str, workers.Outcome]] = {}  # file -> (cache key, outcome)
        self.cwd = os.getcwd()

    def job(self, text: str, digest: str, display: str, diags: list[Diagnostic],
            analysed: str | None) -> tuple[workers.Job, str]:
        job = workers.Job(text, digest, display, diags, analysed)
        where = repr(helper_import(display, self.options.helpers, self.options.helpers_within))
        return job, job_key(job, self.options, where, self.cwd)

    def compute(self, work: list[tuple[Path, list[Diagnostic]]], analysed: dict[str, str],
                jobs: int | None, progress: Callable[[], None] | None) -> None:
        todo: list[tuple[str, str, workers.Job]] = []
        for file, diags in work:
            try:
                source = files.read(file)
            except files.FileProblem:
                continue  # reported when the file's turn comes
            job, key = self.job(source.text, source.digest, str(file), diags, analysed.get(_key(file)))
            hit = self.cache.get(key, job)
            if hit is not None:
                self.outcomes[str(file)] = (key, hit)
            else:
                todo.append((str(file), key, job))
        if todo:
            self.ready()
        found = workers.repair_all([job for _, _, job in todo], self.options, self.diagnose, jobs, progress)
        for (file, key, _), outcome in zip(todo, found):
            self.outcomes[file] = (key, outcome)
            self.cache.put(key, outcome)

    def outcome(self, file: Path, source: files.SourceFile, diags: list[Diagnostic],
                analysed: str | None) -> tuple[str, workers.Outcome]:
        """The repair of ``source`` (computed now if the bytes are not the ones repaired before)."""
        known = self.outcomes.get(str(file))
        if known is not None and known[1].digest == source.digest:
            return known
        job, key = self.job(source.text, source.digest, str(file), diags, analysed)
        outcome = workers.repair_file(job, self.options, self.diagnose)
        self.cache.put(key, outcome)
        return key, outcome


def _fix_file(file: Path, diags: list[Diagnostic], plan: _Planned, run: FixRun, write: bool,
              trees: TreeModules, modes: list[str], analysed: str | None = None) -> FileResult | None:
    """Read, repair and (with ``write``) write back one file, its folder locked (see :func:`fix_paths`);
    problems go to ``run.errors``; decisions to ``run.decisions`` under each of ``modes``."""
    try:
        with files.locked(file):
            return _fix_locked(file, diags, plan, run, write, trees, modes, analysed)
    except files.FileProblem as exc:
        run.errors.append((str(file), str(exc)))
        return None


def _fix_locked(file: Path, diags: list[Diagnostic], plan: _Planned, run: FixRun, write: bool,
                trees: TreeModules, modes: list[str], analysed: str | None) -> FileResult | None:
    display = str(file)
    try:
        source = files.read(file)
    except files.FileProblem as exc:
        run.errors.append((display, str(exc)))
        return None
    _, outcome = plan.outcome(file, source, diags, analysed)
    run.notes += outcome.notes
    if outcome.error is not None:
        run.errors.append((display, outcome.error))
        return None
    if outcome.result is None or outcome.diags is None:
        return None
    diags = outcome.diags
    res = replace(outcome.result, applied=list(outcome.result.applied),  # the outcome may be cached again
                  remaining=[replace(r) for r in outcome.result.remaining])
    # the findings left, at their positions in the repaired text (before they are put at the user's lines)
    left = {fixability.site(r.diagnostic): r.reason or "mend fix left it" for r in res.remaining
            if r.diagnostic.fix is not None and r.diagnostic.source == "static"}
    settled = res.settled
    _remaining_in_original(res)
    if res.error is None:
        still = {(r.diagnostic.code, r.diagnostic.line): r.reason or "mend fix left it" for r in res.remaining}
        run.decisions[f"{modes[0]}:{source.digest}"] = fixability.decisions_for(diags, still)
    run.files.append(res)
    if res.error:
        run.errors.append((display, res.error))
    elif res.changed and not _helper_module(res, source, plan.options, trees, run):
        pass
    elif write and res.changed:
        try:
            files.write(source, res.fixed)
        except files.FileProblem as exc:
            res.error = str(exc)
            res.fixed, res.applied = res.original, []
            run.errors.append((display, res.error))
        else:
            run.written.append(display)
            written = _record_left(file, res, left, modes, run)
            if written is not None and settled is not None:  # the next run repairs nothing here
                _, again = plan.job(written.text, written.digest, display, settled, written.digest)
                plan.cache.settled(again, outcome)
    return res


def _record_left(file: Path, res: FileResult, left: dict[str, str], modes: list[str],
                 run: FixRun) -> files.SourceFile | None:
    """Record the findings a written file still has as declined, in every mode the run covers: ``mend check``
    of the repaired file then promises no fix that ``mend fix`` would not make. The file as written, or None
    when it cannot be read back or changed again since."""
    try:
        written = files.read(file)
    except files.FileProblem:
        return None
    if written.text != res.fixed:
        return None  # changed again since: nothing to say about those bytes
    for mode in modes:
        run.decisions[f"{mode}:{written.digest}"] = dict(left)
    return written


def _covered(recorded: Diagnostic, found: list[Diagnostic]) -> bool:
    """Whether a static finding of the same rule already covers the recorded site's line."""
    return any(d.code == recorded.code and d.line <= recorded.line <= (d.end_line or d.line) for d in found)


def _inside(given: list[Path], targets: list[Path], run: FixRun) -> list[Path]:
    """The targets whose real path lies under a path the user gave, or that were named themselves; a
    file reached through a link that leads outside them is left alone, with a note."""
    named = {os.path.abspath(p) for p in given}
    kept = []
    for path in targets:
        if os.path.abspath(path) in named or within(path, given):
            kept.append(path)
        else:
            run.notes.append((str(path), f"a link to {os.path.realpath(path)}, outside the paths given; "
                                         "not fixed (name it to fix it)"))
    return kept


def _remaining_in_original(res: FileResult) -> None:
    """Put the findings left after a repair (found by re-checking the repaired text) at their lines in the
    user's file: a helper inserted above them moved them down in the repaired text."""
    if not res.changed or not res.remaining:
        return
    lines = line_map(res.original, res.fixed)
    for r in res.remaining:
        data = r.diagnostic.to_dict()
        data["line"] = original_line(lines, r.diagnostic.line)
        if r.diagnostic.end_line is not None:
            data["end_line"] = max(data["line"], original_line(lines, r.diagnostic.end_line))
        r.diagnostic = Diagnostic.from_dict(data)


def _helper_module(res: FileResult, source: files.SourceFile, options: FixOptions, trees: TreeModules,
                   run: FixRun) -> bool:
    """The helper module the repaired file imports from, written (or proposed) first; False, the file left as
    it was and the error recorded, when it cannot be."""
    try:
        module = trees.provide(res.path, res.helpers, options.helpers, source, options.helpers_within)
    except files.FileProblem as exc:
        res.error = f"cannot write {exc}"
        res.fixed, res.applied = res.original, []
        run.errors.append((res.path, res.error))
        return False
    if module is not None and module.changed and all(f is not module for f in run.files):
        run.files.append(module)
        if trees.write:
            run.written.append(module.path)
    return True


def _key(path: str | Path) -> str:
    return str(Path(path).resolve())


def _once_each(targets: list[Path], run: FixRun) -> list[Path]:
    """One path per real file (a regular path before a link to it), in the order given."""
    groups: dict[Any, list[Path]] = {}
    for path in targets:
        groups.setdefault(files.identity(path) or str(path), []).append(path)
    chosen: set[Path] = set()
    for paths in groups.values():
        pick = next((p for p in paths if not p.is_symlink()), paths[0])
        chosen.add(pick)
        for other in paths:
            if other is not pick:
                run.notes.append((str(other), f"the same file as {pick}, fixed once"))
    return [p for p in targets if p in chosen]


def _unique(diags: list[Diagnostic]) -> list[Diagnostic]:
    """The diagnostics of one real file, once each (a file reached by two paths is checked twice)."""
    seen: dict[tuple, Diagnostic] = {}
    for d in diags:
        seen.setdefault((d.code, d.line, d.col, d.end_line, d.end_col, d.source), d)
    return list(seen.values())


__all__ = ["FixError", "FixRun", "fix_paths", "locate_site", "options_from_config", "runtime_diagnostics"]
