"""``mend check`` (the static analyzer, ruff's contract) and ``mend rule`` (rule documentation)."""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Optional

import typer

from mend import settings
from mend.analyzers.static import config as cfgmod
from mend.analyzers.static.output import FORMATS, render, statistics, summary_line
from mend.cli.progress import Progress


def _split(values: Optional[list[str]]) -> Optional[tuple[str, ...]]:
    if not values:
        return None
    out: list[str] = []
    for v in values:
        out.extend(x.strip().upper() if x.strip().upper() == "ALL" else x.strip() for x in v.split(",") if x.strip())
    return tuple(out)


def _fail(message: str) -> None:
    typer.echo(f"mend: error: {message}", err=True)
    raise typer.Exit(2)


def check(
    paths: Optional[list[str]] = typer.Argument(None, help="Files or folders to check; `-` reads stdin."),
    select: Optional[list[str]] = typer.Option(None, "--select", help="Rule codes or prefixes to enable (ALL)."),
    ignore: Optional[list[str]] = typer.Option(None, "--ignore", help="Rule codes or prefixes to disable."),
    extend_select: Optional[list[str]] = typer.Option(None, "--extend-select", help="Enable more rules."),
    output_format: str = typer.Option("concise", "--output-format", envvar=settings.OUTPUT_FORMAT.name,
                                      help=f"One of: {', '.join(FORMATS)}."),
    output_file: Optional[Path] = typer.Option(None, "--output-file", "-o", help="Write the report to a file."),
    show_statistics: bool = typer.Option(False, "--statistics", help="Count findings per rule."),
    exit_zero: bool = typer.Option(False, "--exit-zero", help="Exit 0 even when there are findings."),
    stdin_filename: Optional[str] = typer.Option(None, "--stdin-filename", help="The path of the file on stdin."),
    force_exclude: bool = typer.Option(False, "--force-exclude", help="Apply exclusions to files named on the "
                                                                       "command line too (for pre-commit)."),
    jobs: Optional[int] = typer.Option(None, "--jobs", "-j", min=1, help="Worker processes (default: CPU count)."),
    no_cache: bool = typer.Option(False, "--no-cache", help="Do not read or write the result cache."),
    cache_dir: Optional[Path] = typer.Option(None, "--cache-dir", help="Where the result cache lives."),
    config_file: Optional[Path] = typer.Option(None, "--config", help="Use this pyproject.toml."),
    isolated: bool = typer.Option(False, "--isolated", help="Ignore every configuration file."),
    ignore_noqa: bool = typer.Option(False, "--ignore-noqa", help="Report findings silenced by noqa comments."),
    regions: Optional[str] = typer.Option(None, "--regions", help="modules | compiled-only"),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Print findings only, no summary."),
    show_traced: bool = typer.Option(False, "--show-traced", help="List the functions mend considers traced "
                                                                   "by torch.compile, and why, then exit."),
) -> None:
    """Find code that breaks torch.compile graphs or triggers recompiles (no torch import).

    Exit codes: 0 no findings, 1 findings, 2 usage or internal error.
    """
    if output_format not in FORMATS:
        _fail(f"unknown --output-format {output_format!r} (choose from {', '.join(FORMATS)})")
    paths = list(paths or ["."])
    use_stdin = paths == ["-"]
    if "-" in paths and not use_stdin:
        _fail("`-` (stdin) cannot be combined with other paths")
    try:
        where = [stdin_filename] if (use_stdin and stdin_filename) else ([] if use_stdin else paths)
        config = cfgmod.load_config(where, config_file, isolated)
        config = config.with_overrides(select=_split(select), ignore=_split(ignore),
                                       extend_select=_split(extend_select), regions=regions,
                                       cache_dir=cache_dir.resolve() if cache_dir else None)
    except cfgmod.ConfigError as exc:
        _fail(str(exc))
        return
    if not no_cache and not use_stdin and _cache_refused(config):
        no_cache = True
    try:
        if use_stdin:
            diags, files_checked = _check_stdin(config, stdin_filename, force_exclude, ignore_noqa)
        else:
            diags, files_checked = _check_paths(paths, config, jobs, no_cache, force_exclude, ignore_noqa, quiet,
                                                show_traced)
    except FileNotFoundError as exc:
        _fail(str(exc))
        return
    except typer.Exit:
        raise
    except Exception as exc:  # an internal error is exit code 2, with a message, never a traceback dump
        if settings.DEBUG.get():
            raise
        _fail(f"internal error: {type(exc).__name__}: {exc} (set MEND_DEBUG=1 for a traceback)")
        return
    _emit(diags, files_checked, output_format, output_file, show_statistics, quiet)
    raise typer.Exit(0 if (exit_zero or not diags) else 1)


def _cache_refused(config) -> bool:  # noqa: ANN001
    """Whether the default result cache leads out of its folder through a link (then it is not used)."""
    from mend.analyzers.static.engine import cache_dir_for

    if cache_dir_for(config) is not None:
        return False
    folder = (config.root or Path.cwd()) / ".mend_cache"
    typer.echo(f"mend: warning: the result cache {folder} leads out of {folder.parent} through a link; it is "
               "not used (--cache-dir names a cache folder anywhere)", err=True)
    return True


def _check_stdin(config, stdin_filename: Optional[str], force_exclude: bool, ignore_noqa: bool):
    """The file on stdin, named ``stdin_filename`` (``-`` when not given)."""
    from mend.analyzers.diagnostic import Diagnostic
    from mend.analyzers.static.discovery import discover_files
    from mend.analyzers.static.engine import check_source
    from mend.analyzers.static.source import UnreadableSource, decode_source

    name = stdin_filename or "-"
    if stdin_filename and force_exclude:
        try:
            if not discover_files([stdin_filename], config, force_exclude=True):
                raise typer.Exit(0)
        except FileNotFoundError:
            pass
    data = sys.stdin.buffer.read()
    try:
        source = decode_source(data)
        diags = check_source(source, name if stdin_filename else "<stdin>", config, ignore_noqa=ignore_noqa)
        diags = [dataclasses.replace(d, path=name) for d in diags]
    except UnreadableSource as exc:
        diags = [Diagnostic("MND902", f"cannot read file: {exc}", name, 1, 1, name="unreadable-file")]
    return diags, [name]


def _check_paths(paths: list[str], config, jobs: Optional[int], no_cache: bool, force_exclude: bool,
                 ignore_noqa: bool, quiet: bool, show_traced: bool):
    """The files under ``paths`` (with ``--show-traced``: print the traced functions and exit)."""
    from mend.analyzers.static.engine import check_paths, display_path

    progress = None
    bar = None
    if sys.stderr.isatty() and not quiet:
        bar = Progress("mend check")
        progress = bar.tick
    try:
        result = check_paths(paths, config, jobs=jobs, use_cache=not no_cache, force_exclude=force_exclude,
                             ignore_noqa=ignore_noqa, progress=progress, need_project=show_traced)
    finally:
        if bar:
            bar.close()
    for path, why in result.skipped + result.timed_out:
        typer.echo(f"mend: skipped {display_path(Path(path))}: {why}", err=True)
    if show_traced:
        for f in result.files:
            for t in result.project.traced_functions(str(f)):
                typer.echo(f"{display_path(f)}:{t.line}: {t.qualname} ({t.reason})")
        raise typer.Exit(0)
    return result.diagnostics, [str(f) for f in result.files]


def _emit(diags, files_checked: list[str], output_format: str, output_file: Optional[Path], show_statistics: bool,
          quiet: bool) -> None:
    """Write the report (and, in the text formats, the summary line) to stdout or ``output_file``."""
    text = statistics(diags, "json" if output_format == "json" else "concise") if show_statistics else render(
        output_format, diags, files_checked)
    if output_format in ("concise", "full") and not show_statistics and not quiet:
        if output_file is None:
            text += summary_line(diags)
    if output_file is not None:
        try:
            output_file.write_text(text, encoding="utf-8")
        except OSError as exc:
            _fail(f"cannot write {output_file}: {exc}")
    else:
        sys.stdout.write(text)
        sys.stdout.flush()


def rule(
    code: Optional[str] = typer.Argument(None, help="A rule code such as MND101."),
    show_all: bool = typer.Option(False, "--all", help="List every rule."),
    output_format: str = typer.Option("text", "--output-format", help="text | json | markdown"),
    write_docs: Optional[Path] = typer.Option(None, "--write-docs", help="Write the rule pages to a folder."),
) -> None:
    """Show a rule's documentation: what it does, why it is bad, example, fix safety, references."""
    from mend.analyzers.static import docs
    from mend.analyzers.static.rules import RULES

    if output_format not in ("text", "json", "markdown"):
        _fail(f"unknown --output-format {output_format!r} (choose from text, json, markdown)")
    if write_docs is not None:
        write_docs.mkdir(parents=True, exist_ok=True)
        for name, content in docs.generated_files().items():
            (write_docs / name).write_text(content, encoding="utf-8")
        typer.echo(f"wrote {len(RULES) + 1} files to {write_docs}")
        return
    if show_all == (code is not None):
        _fail("give a rule code (`mend rule MND101`) or `--all`")
    if code is not None:
        code = code.upper()
        if code not in RULES:
            by_name = {r.name: c for c, r in RULES.items()}
            if code.lower() in by_name:
                code = by_name[code.lower()]
            else:
                _fail(f"unknown rule {code!r}; `mend rule --all` lists them")
        r = RULES[code]
        if output_format == "json":
            data = r.to_dict()
            data["fix_safety"], data["fix"] = docs.fix_safety(code)
            typer.echo(json.dumps(data, indent=2))
        else:
            typer.echo(docs.markdown(r), nl=False)
        return
    if output_format == "json":
        out = []
        for c, r in sorted(RULES.items()):
            data = r.to_dict()
            data["fix_safety"], data["fix"] = docs.fix_safety(c)
            out.append(data)
        typer.echo(json.dumps(out, indent=2))
    elif output_format == "markdown":
        typer.echo("\n".join(docs.markdown(r) for _, r in sorted(RULES.items())), nl=False)
    else:
        for c, r in sorted(RULES.items()):
            _, fix = docs.fix_safety(c)
            mark = "[*]" if fix and fix["applicability"] == "safe" else ("[-]" if fix else "   ")
            typer.echo(f"{c}  {mark}  {r.name:48s} {', '.join(r.registry_ids)}")
        typer.echo("\n[*] safe fix available   [-] unsafe fix available (mend fix --unsafe-fixes)")


def register(app: typer.Typer) -> None:
    """Add ``mend check`` and ``mend rule`` to ``app``."""
    app.command("check")(check)
    app.command("rule")(rule)
