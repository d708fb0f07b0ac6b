"""``mend fix``: apply the rewriter's repairs (a thin layer over ``mend.rewriter.api.fix_paths``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING

import typer

from mend.cli.progress import Progress

if TYPE_CHECKING:
    from mend.rewriter.api import FixRun

EXIT_OK, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


def _split(values: list[str] | None) -> tuple[str, ...]:
    out: list[str] = []
    for v in values or []:
        out.extend(x.strip().upper() for x in v.split(",") if x.strip())
    return tuple(out)


def fix(
    paths: list[Path] = typer.Argument(None, help="Files or folders to repair (default: the current folder)."),
    diff: bool = typer.Option(False, "--diff", help="Print a unified diff of the repairs; write nothing."),
    unsafe_fixes: bool = typer.Option(False, "--unsafe-fixes", help="Also apply fixes that may change behaviour."),
    select: list[str] = typer.Option(None, "--select", help="Only these rule codes or prefixes (comma-separated)."),
    ignore: list[str] = typer.Option(None, "--ignore", help="Skip these rule codes or prefixes (comma-separated)."),
    exit_non_zero_on_fix: bool = typer.Option(False, "--exit-non-zero-on-fix",
                                              help="Exit 1 when any file was repaired."),
    side_effects: str = typer.Option(None, "--side-effects",
                                     help="Side-effect policy: keep (default), guard, defer or drop; "
                                          "overrides [tool.mend] side-effects."),
    helpers: str = typer.Option(None, "--helpers", metavar="tree|import",
                                help="Where repaired code finds mend's helper functions: tree (default: a module "
                                     "_mend.py written into the repaired package) or import (from the mend "
                                     "package); overrides [tool.mend] helpers."),
    torch_rng: bool = typer.Option(False, "--torch-rng",
                                   help="Allow replacing random.random() with torch's RNG (unsafe)."),
    from_run: Path = typer.Option(None, "--from-run", help="Also repair the sites recorded by `mend run` "
                                                           "in this data file (e.g. .mend/run.json)."),
    verify_harness: str = typer.Option(None, "--verify", metavar="HARNESS",
                                       help="path.py:function returning (model_or_fn, args, kwargs): run the "
                                            "original and the repaired code and compare; writes nothing."),
    verify_timeout: float = typer.Option(600.0, "--verify-timeout", metavar="SECONDS", min=1,
                                         help="Give up on a --verify worker after this long."),
    config: Path = typer.Option(None, "--config", help="Read [tool.mend] from this pyproject.toml."),
    isolated: bool = typer.Option(False, "--isolated", help="Ignore configuration files."),
    jobs: int = typer.Option(None, "--jobs", "-j", min=1, help="Worker processes (default: CPU count); the "
                                                               "result is the same with any number."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the result caches."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Only print the summary line."),
) -> None:
    """Repair graph breaks and recompile triggers in place (safe fixes; --unsafe-fixes for more)."""
    from mend.rewriter.api import FixError, fix_paths
    from mend.rewriter.options import HELPER_MODES, SIDE_EFFECT_POLICIES, FixOptions

    targets = [Path(p) for p in (paths or [Path(".")])]
    missing = [str(p) for p in targets if not p.exists()]
    if missing:
        typer.echo(f"error: no such file or folder: {', '.join(missing)}", err=True)
        raise typer.Exit(EXIT_ERROR)
    if side_effects is not None and side_effects not in SIDE_EFFECT_POLICIES:
        typer.echo(f"error: --side-effects must be {', '.join(SIDE_EFFECT_POLICIES)}, got {side_effects!r}",
                   err=True)
        raise typer.Exit(EXIT_ERROR)
    if helpers is not None and helpers not in HELPER_MODES:
        typer.echo(f"error: --helpers must be {' or '.join(HELPER_MODES)}, got {helpers!r}", err=True)
        raise typer.Exit(EXIT_ERROR)
    options = FixOptions(unsafe=unsafe_fixes, torch_rng=torch_rng, select=_split(select), ignore=_split(ignore))
    write = not diff and verify_harness is None
    bar = Progress("mend fix") if sys.stderr.isatty() and not quiet else None
    try:
        run = fix_paths(targets, options, write=write, side_effects=side_effects, helpers=helpers,
                        config_file=str(config) if config else None, isolated=isolated, from_run=from_run,
                        record=verify_harness is None,  # --verify writes nothing, not even decisions
                        jobs=jobs, use_cache=not no_cache and verify_harness is None,
                        progress=bar.tick if bar else None)
    except (FixError, ValueError) as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(EXIT_ERROR) from None
    except KeyboardInterrupt:
        typer.echo("interrupted: every file is either unchanged or fully repaired", err=True)
        raise typer.Exit(130) from None
    finally:
        if bar is not None:
            bar.close()

    _report(run, write=write, diff=diff, quiet=quiet, unsafe_fixes=unsafe_fixes)
    if verify_harness is not None:
        raise typer.Exit(_verify(verify_harness, targets, run, verify_timeout))
    if run.errors:
        raise typer.Exit(EXIT_ERROR)
    if diff and run.changed:
        raise typer.Exit(EXIT_FINDINGS)
    if exit_non_zero_on_fix and run.applied:
        raise typer.Exit(EXIT_FINDINGS)
    raise typer.Exit(EXIT_FINDINGS if run.remaining else EXIT_OK)


def _report(run: FixRun, *, write: bool, diff: bool, quiet: bool, unsafe_fixes: bool) -> None:
    """The diff, one line per repair, remaining finding, note and error, and the summary line."""
    if diff:
        from mend.rewriter.matching import unified_diff  # the rewriter is loaded: it made ``run``

        for res in run.changed:
            sys.stdout.writelines(unified_diff(
                res.original.splitlines(keepends=True), res.fixed.splitlines(keepends=True),
                fromfile=f"a/{res.path}", tofile=f"b/{res.path}"))
    if not quiet:
        for res in run.files:
            for a in res.applied:
                mark = "fixed" if write else "would fix"
                typer.echo(f"{res.path}:{a.line}:{a.col}: {a.code} {mark}: {a.message}"
                           + (" [unsafe]" if a.applicability == "unsafe" else ""))
            for r in res.remaining:
                d = r.diagnostic
                typer.echo(f"{res.path}:{d.line}:{d.col}: {d.code} not fixed: {r.reason}")
        for path, msg in run.notes:
            typer.echo(f"note: {path}: {msg}")
    for path, msg in run.errors:
        typer.echo(f"error: {path}: {msg}", err=True)
    verb = "Fixed" if write else "Would fix"
    unsafe_hidden = sum(1 for f in run.files for r in f.remaining if r.unsafe_available)
    repaired = [r for r in run.changed if r.applied]  # the helper module written beside them is not counted
    summary = f"{verb} {run.applied} finding(s) in {len(repaired)} file(s); {run.remaining} remaining"
    if unsafe_hidden and not unsafe_fixes:
        summary += f" ({unsafe_hidden} fixable with --unsafe-fixes)"
    typer.echo(summary + ".")


def _verify(harness: str, targets: list[Path], run: FixRun, timeout: float) -> int:
    """Run ``--verify``; the exit code (0 same, 1 different, 2 could not run: one line says why)."""
    from mend.analyzers.runtime.harness import HarnessError
    from mend.rewriter.verify import VerifyError, verify

    fixed = {Path(r.path): r.fixed for r in run.changed}
    root = _common_root(targets)  # the tree being fixed; the harness may live anywhere
    try:
        verdict = verify(harness, root, fixed, timeout=timeout, results=[r for r in run.changed if r.applied])
    except (HarnessError, VerifyError) as exc:
        typer.echo(f"error: --verify: {exc}", err=True)
        if getattr(exc, "traceback", ""):
            typer.echo(exc.traceback.rstrip("\n"), err=True)
        return EXIT_ERROR
    for r in run.changed:
        typer.echo(f"repaired: {r.path} ({len(r.applied)} fix(es))")
    for line in verdict.lines():
        typer.echo(line)
    return EXIT_OK if verdict.ok else EXIT_FINDINGS


def _common_root(paths: list[Path]) -> Path:
    import os

    resolved = [str((p if p.is_dir() else p.parent).resolve()) for p in paths]
    return Path(os.path.commonpath(resolved))


def register(app: typer.Typer) -> None:
    app.command("fix")(fix)
