"""Running the analysis: one file (:func:`check_source`) or a tree (:func:`check_paths`).

Phase 1 (per file, cacheable, parallel with ``-j``): read, decode, pre-filter, ``ast.parse`` once,
one pass that records bindings, classes, functions, compile sites and candidate findings.
Phase 2 (whole tree, in memory): the project index decides which functions are traced; findings in
untraced code are dropped; the project checkers add theirs for each traced function (calls to
``@torch.compiler.disable`` functions, calls that break inside ``try``/loops); rule selection,
``per-file-ignores`` and ``noqa`` are applied; findings become :class:`Diagnostic` values.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import os
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from mend import deadline
from mend.analyzers.diagnostic import Applicability, Diagnostic, Fix
from mend.analyzers.paths import escaping
from mend.analyzers.static import fixability
from mend.analyzers.static.cache import ResultCache, file_key
from mend.analyzers.static.config import Config, target_torch
from mend.analyzers.static.discovery import discover_files
from mend.analyzers.static.module import ModuleAnalyzer
from mend.analyzers.static.regions import Project
from mend.analyzers.static.rules import RULES
from mend.analyzers.static.rules.base import PROJECT_CHECKERS, Finding
from mend.analyzers.static.source import Suppressions, UnreadableSource, decode_source, read_suppressions
from mend.analyzers.static.summary import FileSummary
from mend.safeio import MAX_SOURCE_BYTES, NotRegular, read_file

# A file that mentions none of these cannot hold a compile root or a module forward on its own; it is
# only parsed when traced code elsewhere calls into it.
PREFILTER = (b"torch", b"forward", b"compile", b"Module")


@functools.lru_cache(maxsize=4096)
def _package_prefix(folder: str) -> tuple[str, ...]:
    """Package names of ``folder`` and its parents, walking up while ``__init__.py`` exists."""
    if not os.path.isfile(os.path.join(folder, "__init__.py")):
        return ()
    parent = os.path.dirname(folder)
    if parent == folder:
        return (os.path.basename(folder),)
    return (*_package_prefix(parent), os.path.basename(folder))


def module_name_for(path: Path) -> tuple[str, bool]:
    """Dotted module name of ``path`` (walking up ``__init__.py`` packages) and whether it is a package."""
    p = os.path.abspath(path)
    name = os.path.basename(p)
    is_package = name == "__init__.py"
    parts = list(_package_prefix(os.path.dirname(p)))
    if not is_package:
        parts.append(name[:-3] if name.endswith(".py") else Path(name).stem)
    return ".".join(parts), is_package


def _meta_summary(path: str, module: str, is_package: bool, code: str, message: str, line: int = 1,
                  col: int = 1) -> FileSummary:
    s = FileSummary(path=path, module=module, is_package=is_package)
    s.findings.append(Finding(code, message, line, col, line, col + 1, None))
    return s


def analyze_bytes(data: bytes, path: str, module: str, is_package: bool, prefilter: bool = True) -> FileSummary:
    """Phase 1 for one file. Never raises for bad input: MND901/MND902 describe it."""
    try:
        source = decode_source(data)
    except UnreadableSource as exc:
        return _meta_summary(path, module, is_package, "MND902", f"cannot read file: {exc}")
    return analyze_text(source, path, module, is_package, prefilter and not any(k in data for k in PREFILTER))


def analyze_text(source: str, path: str, module: str, is_package: bool, skip: bool = False) -> FileSummary:
    if skip:
        s = FileSummary(path=path, module=module, is_package=is_package, skipped=True)
        s.lines = source.count("\n") + 1
        return s
    try:
        tree = ast.parse(source, filename=path)
    except SyntaxError as exc:
        line = exc.lineno or 1
        col = exc.offset or 1
        return _meta_summary(path, module, is_package, "MND901", f"syntax error: {exc.msg}", max(line, 1),
                             max(col, 1))
    except (ValueError, RecursionError, MemoryError) as exc:
        return _meta_summary(path, module, is_package, "MND901", f"cannot parse file: {exc}")
    try:
        summary = ModuleAnalyzer(tree, source, path, module, is_package).run()
    except RecursionError:
        return _meta_summary(path, module, is_package, "MND901", "file is too deeply nested to analyse")
    summary.suppressions = read_suppressions(source)
    return summary


_FIXES: dict[str, Fix | None] = {}


def fix_for(code: str) -> Fix | None:
    """The fix a diagnostic of ``code`` advertises (``[*]`` for safe ones), from the rule's FixInfo."""
    if code not in _FIXES:
        info = RULES[code].fix
        _FIXES[code] = None if info is None else Fix(
            message=info.summary,
            applicability=Applicability.SAFE if info.applicability == "safe" else Applicability.UNSAFE)
    return _FIXES[code]


def to_diagnostic(f: Finding, path: str) -> Diagnostic:
    rule = RULES[f.code]
    data = dict(f.data)
    if f.func:
        data.setdefault("function", f.func)
    return Diagnostic(
        code=f.code, message=f.message, path=path, line=f.line, col=f.col, end_line=f.end_line, end_col=f.end_col,
        severity=rule.severity, name=rule.name, fix=fix_for(f.code),
        registry_ids=tuple(r for r in rule.registry_ids if r.startswith("GB")), source="static", data=data,
    )


def diagnostics_for(summary: FileSummary, project: Project, config: Config, display_path: str,
                    ignore_noqa: bool = False) -> list[Diagnostic]:
    """Phase 2 for one file: keep findings of traced code, add the project checkers', select, apply noqa."""
    out: list[Diagnostic] = []
    findings: list[Finding] = []
    for f in summary.findings:
        if f.func is not None and not project.is_traced(summary.path, f.func):
            continue
        fn = summary.functions.get(f.func) if f.func else None
        if any(not project.ref_is(ref, what, summary, fn) for what, ref in f.requires):
            continue
        findings.append(f)
    for tf in project.traced_functions(summary.path):
        fn = summary.functions[tf.qualname]
        for check in PROJECT_CHECKERS:
            findings.extend(check(project, summary, fn))
    sup: Suppressions = summary.suppressions
    seen = set()
    for f in findings:
        key = (f.code, f.line, f.col)
        if key in seen:
            continue
        seen.add(key)
        if not config.enabled(f.code, summary.path):
            continue
        if not ignore_noqa and sup.suppressed(f.code, f.line, f.end_line if f.code in ("MND901",) else None):
            continue
        out.append(to_diagnostic(f, display_path))
    out.sort(key=Diagnostic.sort_key)
    return out


class DependencyLoader:
    """Load modules of the tree that were not given on the command line, when a reference needs them.

    Called as ``loader(module, near)`` (``near``: the path of the file that refers to ``module``);
    ``loaded`` lists ``(path, key)`` of every dependency read from disk (the run cache checks them)."""

    def __init__(self, config: Config, cache: ResultCache | None = None) -> None:
        self.config = config
        self.cache = cache
        self.loaded: list[tuple[str, str]] = []
        self._memo: dict[str, FileSummary | None] = {}
        self._bases: dict[str, list[str]] = {}

    def __call__(self, module: str, near: str) -> FileSummary | None:
        if module not in self._memo:
            self._memo[module] = self._load(module, near)
        return self._memo[module]

    def _bases_for(self, near: str) -> list[str]:
        """Folders a module may be found under: the package root of ``near``, its folder, the config root."""
        folder = os.path.dirname(os.path.abspath(near)) if near else ""
        out = self._bases.get(folder)
        if out is None:
            out = []
            if folder:
                base = folder
                for _ in range(len(_package_prefix(folder))):
                    base = os.path.dirname(base)
                out += [base, folder]
            if self.config.root:
                out.append(str(self.config.root))
            self._bases[folder] = out
        return out

    def _load(self, module: str, near: str) -> FileSummary | None:
        top = module.split(".")[0]
        if not module or top in sys.stdlib_module_names or top == "torch":
            return None
        parts = module.split(".")
        for base in self._bases_for(near):
            stem = os.path.join(base, *parts)
            for f in (stem + ".py", os.path.join(stem, "__init__.py")):
                if not os.path.isfile(f):
                    continue
                mod, is_pkg = module_name_for(Path(f))
                if mod == module:
                    return self._read(f, module, is_pkg)
        return None

    def _read(self, f: str, module: str, is_pkg: bool) -> FileSummary | None:
        data = _read(Path(f))
        if not isinstance(data, bytes):
            return None
        key = file_key(data, module, self.config.fingerprint())
        self.loaded.append((f, key))
        s = self.cache.get(f, key) if self.cache else None
        if s is None or s.skipped:
            s = analyze_bytes(data, f, module, is_pkg, prefilter=False)
            if self.cache is not None:
                self.cache.put(f, key, s)
        return _as_dependency(s)


def _as_dependency(s: FileSummary) -> FileSummary:
    """A loaded dependency contributes classes and functions, never findings."""
    dep = FileSummary(path=s.path, module=s.module, is_package=s.is_package, imports=s.imports,
                      functions=s.functions, classes=s.classes, compile_sites=[], findings=list(s.findings))
    dep.path = "<dependency>" + s.path
    return dep


def expand_skipped(s: FileSummary) -> None:
    """Parse a file the pre-filter skipped, now that traced code refers to it (in place)."""
    s.skipped = False
    try:
        data = Path(s.path).read_bytes()
    except OSError:
        return
    full = analyze_bytes(data, s.path, s.module, s.is_package, prefilter=False)
    for name in ("imports", "functions", "classes", "compile_sites", "findings", "suppressions", "lines"):
        setattr(s, name, getattr(full, name))


def check_source(source: str, path: str | Path = "<stdin>", config: Config | None = None,
                 project: Project | None = None, ignore_noqa: bool = False) -> list[Diagnostic]:
    """Check one file's text. ``project`` (from :func:`build_project`) supplies the other files."""
    config = config or Config()
    p = Path(path)
    module, is_package = module_name_for(p) if str(path) != "<stdin>" else ("__main__", False)
    summary = analyze_text(source, str(path), module, is_package)
    others = [s for s in (project.summaries.values() if project else ()) if s.path != str(path)]
    proj = Project([summary, *others], config.regions, config.entry_points, DependencyLoader(config), expand_skipped)
    return diagnostics_for(summary, proj, config, str(path), ignore_noqa)


@dataclass
class CheckResult:
    diagnostics: list[Diagnostic] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    lines: int = 0
    cached: int = 0
    analyzed: int = 0
    seconds: float = 0.0
    project: Project | None = None
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (path, why): not a regular file, too large
    timed_out: list[tuple[str, str]] = field(default_factory=list)  # (path, why): past MEND_FILE_TIME_LIMIT
    digests: dict[str, str] = field(default_factory=dict)  # path -> sha256 of the bytes analysed

    @property
    def errors(self) -> int:
        return len(self.diagnostics)


def _work(item: tuple[str, bytes, str, bool, bool, float | None]) -> FileSummary:
    """Phase 1 for one file within its time limit (the last item, seconds; None: no limit)."""
    path, data, module, is_package, prefilter, limit = item
    try:
        with deadline.bounded(limit):
            return analyze_bytes(data, path, module, is_package, prefilter)
    except deadline.TimeLimit as exc:
        s = _meta_summary(path, module, is_package, "MND902", f"cannot analyse file: {exc}")
        s.timed_out = exc.seconds
        return s


def timed_out(summaries: Iterable[FileSummary]) -> list[tuple[str, str]]:
    """(path, why) of each file whose analysis ran past the time limit (its one finding: MND902)."""
    return [(s.path, f"analysis {deadline.TimeLimit(s.timed_out)}") for s in summaries if s.timed_out]


def _read(path: Path) -> bytes | OSError:
    """A source file's bytes; a FIFO, device or folder is never opened for reading (it could block), and
    a file over :data:`~mend.safeio.MAX_SOURCE_BYTES` is not read (:class:`~mend.safeio.NotRegular`)."""
    try:
        return read_file(path, MAX_SOURCE_BYTES)[0]
    except OSError as exc:
        return exc


@dataclass
class _Entry:
    path: str
    module: str
    is_package: bool
    data: bytes | None
    key: str
    prefilter: bool
    error: str | None = None
    skip: str | None = None  # not analysed at all: not a regular file, or too large


def hash_files(files: Iterable[Path], config: Config, explicit: frozenset[str] = frozenset()) -> list[_Entry]:
    """Read every file once and compute its cache key."""
    fp = config.fingerprint()
    out = []
    for f in files:
        path = str(f)
        module, is_package = module_name_for(f)
        data = _read(f)
        if isinstance(data, NotRegular):
            reason = data.strerror or str(data)
            out.append(_Entry(path, module, is_package, None, f"skipped:{reason}", False, skip=reason))
            continue
        if isinstance(data, OSError):
            reason = data.strerror or str(data)
            out.append(_Entry(path, module, is_package, None, f"unreadable:{reason}", False, reason))
            continue
        prefilter = path not in explicit
        out.append(_Entry(path, module, is_package, data, file_key(data, module, fp + ("" if prefilter else "|explicit")),
                          prefilter))
    return out


def summarize_files(files: Iterable[Path], config: Config, jobs: int | None = None, use_cache: bool = True,
                    progress=None, explicit: frozenset[str] = frozenset(),
                    entries: list[_Entry] | None = None) -> tuple[list[FileSummary], ResultCache | None, int]:
    """Phase 1 over ``files``. Files in ``explicit`` (named on the command line) skip the pre-filter:
    they are always parsed, so a syntax error in a file handed over by pre-commit is reported."""
    cache = None
    folder = cache_dir_for(config) if use_cache else None
    if folder is not None:
        cache = ResultCache(folder)
        cache.load()
    if entries is None:
        entries = hash_files(files, config, explicit)
    summaries: list[FileSummary] = []
    todo: list[tuple[str, bytes, str, bool, bool, float | None]] = []
    limit = deadline.limit()
    keys: dict[str, str] = {}
    for e in entries:
        if e.skip is not None:
            continue
        if e.error is not None:
            summaries.append(_meta_summary(e.path, e.module, e.is_package, "MND902", f"cannot read file: {e.error}"))
            continue
        hit = cache.get(e.path, e.key) if cache else None
        if hit is not None:
            summaries.append(hit)
            if progress:
                progress()
            continue
        keys[e.path] = e.key
        todo.append((e.path, e.data, e.module, e.is_package, e.prefilter, limit))
    jobs = jobs if jobs is not None else (os.cpu_count() or 1)
    if jobs > 1 and len(todo) >= 32:
        from concurrent.futures import ProcessPoolExecutor

        with ProcessPoolExecutor(max_workers=jobs) as pool:
            for s in pool.map(_work, todo, chunksize=max(1, min(16, len(todo) // (jobs * 4) or 1))):
                summaries.append(s)
                if progress:
                    progress()
    else:
        for item in todo:
            summaries.append(_work(item))
            if progress:
                progress()
    if cache is not None:
        for s in summaries[-len(todo):] if todo else ():
            if not s.timed_out:  # a later run, or a higher limit, tries it again
                cache.put(s.path, keys[s.path], s)
    return summaries, cache, len(todo)


def cache_dir_for(config: Config) -> Path | None:
    """The result cache folder: the one configured, else ``.mend_cache`` beside the configuration root
    (or in the current folder); None when that default leads out of its folder through a link."""
    if config.cache_dir is not None:
        return config.cache_dir
    base = config.root or Path.cwd()
    folder = base / ".mend_cache"
    return None if escaping([folder, folder / "check", folder / ".gitignore"], base) else folder


def build_project(summaries: list[FileSummary], config: Config, cache: ResultCache | None = None) -> Project:
    return Project(summaries, config.regions, config.entry_points, DependencyLoader(config, cache), expand_skipped)


def display_path(path: Path) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if rel.startswith("..") else rel


def _run_key(entries: list[_Entry], config: Config, ignore_noqa: bool) -> str:
    h = hashlib.blake2b(digest_size=20)
    sel = (config.select, config.ignore, config.extend_select, sorted(config.per_file_ignores.items()),
           config.fingerprint(), ignore_noqa, os.getcwd())
    h.update(repr(sel).encode())
    for e in entries:
        h.update(e.path.encode() + b"\0" + e.key.encode() + b"\n")
    return h.hexdigest()


def _deps_unchanged(deps: list[tuple[str, str]], config: Config) -> bool:
    fp = config.fingerprint()
    for path, key in deps:
        data = _read(Path(path))
        if not isinstance(data, bytes):
            return False
        mod, _ = module_name_for(Path(path))
        if file_key(data, mod, fp) != key:
            return False
    return True


def check_paths(paths: Iterable[str | Path], config: Config | None = None, jobs: int | None = None,
                use_cache: bool = True, force_exclude: bool = False, ignore_noqa: bool = False,
                progress=None, need_project: bool = False, mark_fixes: bool = True) -> CheckResult:
    """Check every Python file under ``paths``. See :class:`CheckResult`.

    With the cache on, a run over an unchanged tree (same files, same bytes, same dependencies read
    from disk, same settings) replays the previous run's diagnostics without loading the per-file
    summaries; ``need_project=True`` always builds the project index (``CheckResult.project``).
    ``mark_fixes`` marks each fix with what ``mend fix`` decided for it (``mend fix`` itself turns it off).
    """
    from mend.analyzers.static.cache import RunCache

    t0 = time.perf_counter()
    config = config or Config()
    paths = list(paths)
    files = discover_files(paths, config, force_exclude)
    explicit = frozenset(str(Path(p)) for p in paths if Path(p).is_file())
    entries = hash_files(files, config, explicit)
    skipped = [(e.path, e.skip) for e in entries if e.skip is not None]
    files = [f for f, e in zip(files, entries) if e.skip is None]
    digests = {e.path: fixability.digest(e.data) for e in entries if e.data is not None}
    run_cache = run_key = None
    if use_cache and cache_dir_for(config) is not None:
        run_cache = RunCache(cache_dir_for(config))
        run_key = _run_key(entries, config, ignore_noqa)
        hit = None if need_project else run_cache.get(run_key)
        if hit is not None and _deps_unchanged(hit["deps"], config):
            return CheckResult(diagnostics=_with_decisions(hit["diagnostics"], digests, config, mark_fixes),
                               files=files,
                               lines=hit["lines"], cached=len(files), analyzed=0, seconds=time.perf_counter() - t0,
                               skipped=skipped, digests=digests)
    summaries, cache, analyzed = summarize_files(files, config, jobs, use_cache, progress, explicit, entries)
    project = build_project(summaries, config, cache)
    result = CheckResult(files=files, project=project, analyzed=analyzed, cached=cache.hits if cache else 0,
                         skipped=skipped, digests=digests, timed_out=timed_out(summaries))
    for s in summaries:
        result.lines += s.lines
        if s.path.startswith("<dependency>"):
            continue
        result.diagnostics.extend(diagnostics_for(s, project, config, display_path(Path(s.path)), ignore_noqa))
    if cache is not None:
        cache.save()
    if run_cache is not None and run_key is not None and not result.timed_out:
        deps = list(getattr(project.loader, "loaded", []))
        run_cache.put(run_key, {"deps": deps, "diagnostics": result.diagnostics, "lines": result.lines})
    result.diagnostics = _with_decisions(result.diagnostics, digests, config, use_cache and mark_fixes)
    result.seconds = time.perf_counter() - t0
    return result


def _with_decisions(diags: list[Diagnostic], digests: dict[str, str], config: Config,
                    use_cache: bool) -> list[Diagnostic]:
    """Each fix marked by what ``mend fix`` decided for the bytes analysed (``digests`` by file path;
    :mod:`.fixability`; with ``--no-cache`` nothing is read: every fix is undecided). The run cache holds the
    unmarked diagnostics, since a later ``mend fix --diff`` decides without changing bytes."""
    by_display = {display_path(Path(p)): d for p, d in digests.items()}
    folder = cache_dir_for(config) if use_cache else None
    return fixability.mark(diags, by_display, folder, fixability.config_policy(config.raw), target_torch(config.raw))
