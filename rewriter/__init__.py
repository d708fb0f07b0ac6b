"""mend.rewriter: repair graph breaks and recompile triggers in source (no torch import).

Public API::

    from mend.rewriter import FixOptions, fix_source, fix_paths, fix_info

    fix_source(source, path, diagnostics, FixOptions(unsafe=False, side_effects="keep"),
               diagnose=None) -> FileResult          # one file's text; .fixed, .applied, .remaining
    fix_paths(paths, FixOptions(...), write=True, from_run=None) -> FixRun   # what `mend fix` runs
    fix_info(code) -> FixInfo | None                 # what the rule declares its fix does (the rule
                                                     # registry, mend.analyzers.static.rules)

The repairs: one strategy per module (:mod:`mend.rewriter.strategies`); a rule lists the strategies it tries,
in order, on its entry; :mod:`mend.rewriter.registry` hands those lists to the engine (:mod:`mend.rewriter.engine`).

Run-time helpers for repaired code: :mod:`mend.rewriter.runtime` (``defer``, ``flush``,
``boundary``, ``restore_exceptions``). Verification: :mod:`mend.rewriter.verify`. See ``docs/fix.md``.
"""

from __future__ import annotations

from mend.analyzers.static.rules import FixInfo, fix_info
from mend.rewriter.api import FixError, FixRun, fix_paths
from mend.rewriter.options import FixOptions
from mend.rewriter.results import FileResult


def __getattr__(name: str):  # noqa: ANN202
    """``fix_source``, imported on first use: LibCST and the strategies take a second to import, and a run
    that repairs nothing (every file's repair cached) needs neither."""
    if name == "fix_source":
        from mend.rewriter.registry import fix_source

        return fix_source
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")

__all__ = ["FileResult", "FixError", "FixInfo", "FixOptions", "FixRun", "fix_info", "fix_paths", "fix_source"]
