"""``mend repair-cache list|clear``: the cache of modules repaired at import (``mend run --repair``).

Imports only ``mend.imports`` (standard library): no analyzer, no LibCST, no torch.
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


def register(app: typer.Typer) -> None:
    app.add_typer(repair_cache, name="repair-cache")
