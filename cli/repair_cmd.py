"""``mend repair-cache list|clear|warm``: the cache of modules repaired at import (``mend run --repair``).

``list`` and ``clear`` import only ``mend.imports`` (standard library); ``warm`` runs the repair (the analyzer,
LibCST); none imports torch.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

repair_cache = typer.Typer(help="The cache of modules repaired at import (mend run --repair, mend.repair_imports).",
                           no_args_is_help=True)

CACHE_HELP = "The cache folder (default: $MEND_REPAIR_CACHE, else ~/.cache/mend/repair)."


def _cache(cache_dir: Optional[Path]):  # -> RepairCache
    from mend.imports.cache import RepairCache
    from mend.imports.settings import default_cache_dir

    folder = cache_dir or default_cache_dir()
    if folder.exists() and not folder.is_dir():
        typer.echo(f"mend: the repair cache {folder} is not a folder", err=True)
        raise typer.Exit(2)
    return RepairCache(folder)


@repair_cache.command("list")
def list_entries(
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help=CACHE_HELP),
    output_format: str = typer.Option("table", "--format", "-f", help="table or json."),
    all_entries: bool = typer.Option(False, "--all", help="Also list modules that needed no change."),
) -> None:
    """List the cached modules: status, fixes applied, original file."""
    if output_format not in ("table", "json"):
        typer.echo(f"mend: unknown format {output_format!r}; choose table or json", err=True)
        raise typer.Exit(2)
    cache = _cache(cache_dir)
    entries = [e for e in cache.iter_entries() if all_entries or e.status != "unchanged"]
    if output_format == "json":
        typer.echo(json.dumps([{"module": e.module, "path": e.path, "status": e.status, "key": e.key,
                                "fixes": [f"{a.code}:{a.line}" for a in e.applied], "error": e.error}
                               for e in entries], indent=1))
        return
    for e in entries:
        fixes = ", ".join(f"{a.code}@{a.line}" for a in e.applied)
        typer.echo(f"{e.status:<10} {e.module}  {e.path}" + (f"  [{fixes}]" if fixes else "")
                   + (f"  ({e.error})" if e.error else ""))
    total = sum(1 for _ in cache.iter_entries())
    typer.echo(f"{len(entries)} shown, {total} cached module(s), {cache.size_bytes() / 1e6:.1f} MB in {cache.folder}")


@repair_cache.command("clear")
def clear(cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help=CACHE_HELP)) -> None:
    """Remove every cached repair (the next import repairs again)."""
    cache = _cache(cache_dir)
    try:
        count = cache.clear()
    except OSError as exc:
        typer.echo(f"mend: cannot clear {cache.folder}: {exc}", err=True)
        raise typer.Exit(2) from None
    typer.echo(f"removed {count} cached module(s) from {cache.folder}")


@repair_cache.command("warm")
def warm(
    packages: str = typer.Argument(..., help="The packages to repair ahead of time (comma-separated, e.g. "
                                   "transformers,timm), as `mend run --repair` names them."),
    unsafe_fixes: bool = typer.Option(False, "--unsafe-fixes", help="Also apply unsafe fixes (as the run will)."),
    from_run: Optional[Path] = typer.Option(None, "--from-run", help="Also repair the sites this data file "
                                            "recorded inside the packages (as the run will)."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help=CACHE_HELP),
) -> None:
    """Repair every module of the packages into the cache now, so no process pays the first import's repair
    (a CI image, a shared cache). Run it from the folder the program starts in: the key includes the
    [tool.mend] config found from there. Exit 1 when a module could not be repaired (it would load as it
    is), 2 on bad arguments or a package that is not installed."""
    from mend.imports.settings import RepairSettings, SettingsError
    from mend.imports.warm import warm as warm_packages

    if from_run is not None and not from_run.is_file():
        typer.echo(f"mend: --from-run: no such data file: {from_run}", err=True)
        raise typer.Exit(2)
    cache = _cache(cache_dir)
    try:
        settings = RepairSettings(packages=tuple(packages.split(",")), unsafe=unsafe_fixes,
                                  from_run=str(from_run) if from_run else None, cache_dir=str(cache.folder))
    except SettingsError as exc:
        typer.echo(f"mend: {exc}", err=True)
        raise typer.Exit(2) from None
    report = warm_packages(settings)
    if report.missing:
        typer.echo(f"mend: no installed package named {', '.join(report.missing)}", err=True)
        raise typer.Exit(2)
    for module, why in report.errors:
        typer.echo(f"mend: {module}: {why}", err=True)
    n = sum(report.statuses.values())
    typer.echo(f"{n} module(s): {report.statuses['repaired']} repaired, {report.statuses['unchanged']} unchanged, "
               f"{report.statuses['failed']} failed; {report.new} new in {cache.folder} ({report.seconds:.1f} s)")
    if report.statuses["failed"] or report.errors:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    app.add_typer(repair_cache, name="repair-cache")
