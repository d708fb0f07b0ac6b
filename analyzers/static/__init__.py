"""mend's static analyzer: graph breaks and recompile triggers, found without importing torch.

Public API (``mend.analyzers.static``)::

    load_config(paths, config_file=None, isolated=False) -> Config
    discover_files(paths, config, force_exclude=False) -> list[Path]
    check_source(source, path, config=None, project=None) -> list[Diagnostic]
    check_paths(paths, config, jobs=None, use_cache=True) -> CheckResult
    RULES: dict[str, Rule]

Compiled-region information (for the rewriter and other tools)::

    project = build_project_for(paths, config)          # -> Project (phase 1 + 2, uses the cache)
    project.traced_functions(path) -> list[TracedFunction]
        # each: path, qualname ("Block.forward", "outer.<locals>.inner"), line, end_line,
        #       reason ("compiled" | "module-forward" | "entry-point" | "called from <qualname>"), root
    project.function_at(path, line) -> TracedFunction | None   # innermost traced function at a line
    project.is_traced(path, qualname) -> bool
    project.compile_boundaries(path) -> list[CompileSite]
        # each: line, col (1-based), kind ("decorator" | "call" | "method"), target (a symbolic
        #       reference such as ("qual", "pkg.mod.fn") or ("instance", "pkg.mod.Model"), or None),
        #       func (the qualname of the function holding the site, None at module level)

``path`` is the path string as the files were given (``str(Path)``); diagnostics carry the display
path (relative to the current directory) and ``data["function"]`` = the traced function's qualname.

Nothing here imports torch: the analyzer reads source with :mod:`ast`, resolves names through imports
and scopes itself (:mod:`.names`), infers tensor-ness lightly (:mod:`.tensors`, with the facts about
torch of :mod:`.torch_facts`), walks each file once (:mod:`.module`, :mod:`.walker`) handing nodes to
the rules' checkers (:mod:`.rules`), and decides which code Dynamo traces (:mod:`.regions`). See
``docs/check.md`` and ``docs/adding-a-rule.md``.
"""

from __future__ import annotations

from pathlib import Path

from mend.analyzers.static.config import Config, ConfigError, load_config, target_torch
from mend.analyzers.static.discovery import discover_files
from mend.analyzers.static.engine import (
    CheckResult,
    build_project,
    cache_dir_for,
    check_paths,
    check_source,
    summarize_files,
)
from mend.analyzers.static.regions import Project, TracedFunction
from mend.analyzers.static.rules import RULES, Rule
from mend.analyzers.static.summary import CompileSite


def build_project_for(paths, config: Config | None = None, use_cache: bool = True) -> Project:
    """The project index (traced functions, compile boundaries) for the files under ``paths``."""
    config = config or load_config(list(paths))
    files = discover_files(list(paths), config)
    summaries, cache, _ = summarize_files(files, config, jobs=1, use_cache=use_cache)
    project = build_project(summaries, config, cache)
    if cache is not None:
        cache.save()
    return project


__all__ = [
    "RULES", "CheckResult", "CompileSite", "Config", "ConfigError", "Path", "Project", "Rule", "TracedFunction",
    "build_project", "build_project_for", "cache_dir_for", "check_paths", "check_source", "discover_files", "load_config",
    "target_torch",
]
