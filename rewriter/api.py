"""``fix_paths``: ``mend fix`` as a library call (no torch import).

Files, configuration, noqa and compiled-region inference come from the static analyzer
(``mend.analyzers.static``: ``load_config``, ``discover_files``, ``check_paths``, ``check_source``),
so ``mend fix`` sees exactly what ``mend check`` reports. Runtime evidence (``--from-run``) comes from
the data file of ``mend run`` (``mend.analyzers.runtime.data``) mapped to rule codes by
``mend.analyzers.runtime.mapping``.
"""

from __future__ import annotations

import signal
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.engine import FileResult, FixOptions, fix_source, read_source, write_atomic


class FixError(Exception):
    """A ``mend fix`` run that cannot start (missing analyzer, bad data file); the message says why."""


@dataclass
class FixRun:
    files: list[FileResult] = field(default_factory=list)
    errors: list[tuple[str, str]] = field(default_factory=list)  # (path, message)
    written: list[str] = field(default_factory=list)

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
    missing = [n for n in ("load_config", "discover_files", "check_source") if not hasattr(static, n)]
    if missing:
        raise FixError(f"the static analyzer does not provide {', '.join(missing)} yet")
    return static


def options_from_config(raw: dict[str, Any], base: FixOptions, side_effects: str | None) -> FixOptions:
    policy = side_effects or raw.get("side-effects") or raw.get("side_effects") or base.side_effects
    return FixOptions(unsafe=base.unsafe, side_effects=str(policy), torch_rng=base.torch_rng,
                      select=base.select, ignore=base.ignore, max_rounds=base.max_rounds)


def runtime_diagnostics(data_file: str | Path) -> list[Diagnostic]:
    """Diagnostics for the project sites recorded in a ``mend run`` data file."""
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
    sites: list[tuple[str, Any]] = [(mapping.code_for_break(b, run.root), b) for b in run.breaks]
    sites += [(mapping.code_for_recompile(r), r) for r in run.recompiles]
    for code, site in sites:
        if getattr(site, "in_library", False) or not code or code.startswith("MND9"):
            continue
        path = rdata.resolve(run, site.path)
        col = 1
        try:
            text = path.read_text(encoding="utf-8").splitlines()[site.line - 1]
            col = len(text) - len(text.lstrip()) + 1
        except (OSError, IndexError, UnicodeDecodeError):
            pass
        out.append(Diagnostic(code=code, message=getattr(site, "message", "") or getattr(site, "reason", ""),
                              path=str(path), line=site.line, col=col, source="runtime"))
    return out


def fix_paths(
    paths: Sequence[str | Path],
    options: FixOptions,
    *,
    write: bool = True,
    side_effects: str | None = None,
    config_file: str | None = None,
    isolated: bool = False,
    from_run: str | Path | None = None,
    progress: Callable[[FileResult], None] | None = None,
) -> FixRun:
    """Fix every file under ``paths`` the analyzer reports on; write atomically unless ``write`` is off."""
    static = _static()
    str_paths = [str(p) for p in paths]
    config = static.load_config(str_paths, config_file=config_file, isolated=isolated)
    raw = getattr(config, "raw", {}) or {}
    options = options_from_config(raw, options, side_effects)
    files = static.discover_files(str_paths, config)
    project = None
    by_file: dict[str, list[Diagnostic]] = {}
    if hasattr(static, "check_paths"):
        result = static.check_paths(str_paths, config, use_cache=False)
        project = getattr(result, "project", None)
        for d in result.diagnostics:
            by_file.setdefault(str(Path(d.path).resolve()), []).append(d)
    runtime = runtime_diagnostics(from_run) if from_run is not None else []
    for d in runtime:
        by_file.setdefault(str(Path(d.path).resolve()), []).append(d)
    run = FixRun()
    targets = [Path(f) for f in files]
    if from_run is not None:
        known = {str(f.resolve()) for f in targets}
        targets += [Path(p) for p in by_file if p not in known]
    for file in targets:
        key = str(file.resolve())
        diags = by_file.get(key)
        if diags is None and not hasattr(static, "check_paths"):
            try:
                diags = static.check_source(read_source(file), str(file), config, project)
            except Exception as exc:  # unreadable: reported by mend check as MND902
                run.errors.append((str(file), f"cannot read: {exc}"))
                continue
        if not diags:
            continue
        try:
            source = read_source(file)
        except (OSError, UnicodeDecodeError) as exc:
            run.errors.append((str(file), f"cannot read: {exc}"))
            continue
        display = str(file)

        def diagnose(text: str, display: str = display) -> list[Diagnostic]:
            found = list(static.check_source(text, display, config, project))
            return found + [d for d in runtime_for(text, display)]

        def runtime_for(text: str, display: str) -> list[Diagnostic]:
            return []  # recorded positions are only valid for the original text

        diags = [d if d.path == display else _with_path(d, display) for d in diags]
        res = fix_source(source, display, diags, options, diagnose)
        run.files.append(res)
        if res.error:
            run.errors.append((display, res.error))
        elif write and res.changed:
            _write_protected(file, res.fixed)
            run.written.append(display)
        if progress is not None:
            progress(res)
    return run


def _with_path(d: Diagnostic, path: str) -> Diagnostic:
    data = d.to_dict()
    data["path"] = path
    return Diagnostic.from_dict(data)


def _write_protected(path: Path, text: str) -> None:
    """Write atomically; a SIGTERM or SIGINT that arrives meanwhile is acted on once the write is done
    (the file is then old or new and no temp file is left), as a KeyboardInterrupt."""
    pending: list[int] = []
    previous: dict[int, Any] = {}
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            previous[sig] = signal.signal(sig, lambda signum, frame: pending.append(signum))
        except ValueError:  # not the main thread: signals are not ours to defer
            break
    try:
        write_atomic(path, text)
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if pending:
        raise KeyboardInterrupt(f"signal {pending[0]}")


__all__ = ["FixError", "FixRun", "fix_paths", "options_from_config", "runtime_diagnostics"]
