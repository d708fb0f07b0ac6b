"""``mend run``, ``mend report``, ``mend gate`` and ``mend crosscheck``: the runtime side of mend.

This module is imported by every ``mend`` command, so it imports nothing heavy at module level:
torch is loaded only when ``mend run`` (or ``crosscheck``) actually runs a program.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

DATA_FILE_HELP = "The data file (default .mend/run.json)."


def _data_path(data_file: Optional[Path]) -> Path:
    from mend.analyzers.runtime.data import DEFAULT_DATA_FILE

    return data_file or DEFAULT_DATA_FILE


def _err(message: str) -> None:
    typer.echo(f"mend: {message}", err=True)


def run(
    ctx: typer.Context,
    target: Optional[str] = typer.Argument(None, help="The script to run (or nothing with -m MODULE).", show_default=False),
    module: Optional[str] = typer.Option(None, "-m", "--module", help="Run a module, like `python -m`."),
    data_file: Optional[Path] = typer.Option(None, "--data-file", help=DATA_FILE_HELP),
    append: bool = typer.Option(False, "--append", "-a", help="Merge into an existing data file."),
    fast: bool = typer.Option(
        False, "--fast", help="Run each captured graph eagerly instead of with its backend: same breaks and "
        "recompiles, much faster. Outputs may differ in the last bits from the real backend's."
    ),
    keep_backend: bool = typer.Option(False, "--keep-backend", help="Keep the program's backends (the default; overrides --fast)."),
    source: list[Path] = typer.Option([], "--source", help="A folder that is part of the project even inside "
                                      "site-packages (repeatable), e.g. the transformers package folder."),
    quiet: bool = typer.Option(False, "--quiet", "-q", help="Do not print the summary line."),
    repair: Optional[str] = typer.Option(None, "--repair", help="Repair these packages (comma-separated, e.g. "
                                         "transformers,timm) as the program imports them, with mend fix's safe "
                                         "fixes; child processes too. Their breaks are reported at their own lines."),
    unsafe_fixes: bool = typer.Option(False, "--unsafe-fixes", help="With --repair: also apply unsafe fixes."),
    from_run: Optional[Path] = typer.Option(None, "--from-run", help="With --repair: also repair the sites this "
                                            "data file recorded inside the packages."),
) -> None:
    """Run a Python program with the graph-break recorder attached, like `coverage run`.

    mend run [OPTIONS] [--] script.py ARGS...   or   mend run [OPTIONS] -m module ARGS...
    """
    import os

    from mend.analyzers.paths import default_refused
    from mend.analyzers.runtime.data import FINISHED, RETURNED, DataFileError, save
    from mend.analyzers.runtime.runner import RunError, begin, check_script, run_program, supervise

    args = list(ctx.args)
    if module is not None:
        if target is not None:
            args.insert(0, target)
        what, is_module = module, True
    elif target is None:
        _err("nothing to run: give a script (mend run script.py ARGS) or a module (mend run -m module ARGS)")
        raise typer.Exit(2)
    else:
        what, is_module = target, False
    path = _data_path(data_file)
    refused = None if data_file else default_refused(path, Path.cwd(), "--data-file")
    if refused:
        _err(refused)
        raise typer.Exit(2)
    shown = path  # as the user named it (the default: relative to this folder)
    path = Path(os.path.abspath(path))  # a program that changes folder writes here too
    hook = _repair_hook(repair, unsafe_fixes, from_run) if repair or unsafe_fixes or from_run else None
    folders = [str(s) for s in source] + (_package_folders(hook) if hook else [])
    try:
        if not is_module:
            check_script(what)
        info = begin(path, [("-m " + what) if is_module else what, *args], append, os.getcwd())
    except RunError as exc:
        _err(str(exc))
        raise typer.Exit(2) from None
    except (DataFileError, OSError) as exc:
        _err(f"could not write {path}: {exc}")
        raise typer.Exit(2) from None
    ended = supervise(path, info, os.getcwd())
    if ended is not None:  # this process only waited for the program's process
        _say_how_it_ended(path, info.id, quiet)
        raise typer.Exit(ended)
    try:
        result = run_program(what, args, module=is_module, source=folders, fast=fast and not keep_backend)
    except RunError as exc:
        _err(str(exc))
        raise typer.Exit(2) from None
    if hook is not None:
        from mend.imports.runs import attribute

        attribute(result.data, hook)
    for record in result.data.runs:
        record.id, record.started = info.id, info.started
        record.status = RETURNED if hasattr(os, "fork") else FINISHED
    try:
        written = save(result.data, path, append=append)
    except (DataFileError, OSError) as exc:
        _err(f"could not write {path}: {exc}")
        raise typer.Exit(result.exit_code or 2) from None
    if not quiet:
        from mend.analyzers.runtime.report import summary_line

        _err(f"recorded {summary_line(result.data)}; wrote {shown}" + (" (appended)" if append and len(written.runs) > 1 else ""))
        from mend.analyzers.runtime import compat

        if compat.hook_errors:
            _err(f"{len(compat.hook_errors)} recorder hook error(s); first: {compat.hook_errors[0].splitlines()[-1]}")
    raise typer.Exit(result.exit_code)


def _say_how_it_ended(path: Path, run_id: str, quiet: bool) -> None:
    """One line when the program's process did not end as the program returned (``atexit``, a signal)."""
    from mend.analyzers.runtime.data import DataFileError, find_run, load

    try:
        record = find_run(load(path), run_id)
    except DataFileError:
        return
    if record is None:
        return
    if not record.recorded:
        how = f"was ended by {record.signal}" if record.signal else f"exited with code {record.exit_code}"
        _err(f"the program {how} without returning to mend: its graph breaks were not recorded; {path} says so")
    elif record.signal and not quiet:
        _err(f"the program's process was ended by {record.signal} after it returned; {path} says so")


def _repair_hook(packages: Optional[str], unsafe: bool, from_run: Optional[Path]):  # -> RepairHook
    """Install the import hook for ``mend run --repair`` (exit 2 on a bad package list or data file)."""
    import importlib.util

    from mend.imports import RepairSettings, SettingsError, repair_imports

    if not packages:
        _err("--unsafe-fixes and --from-run need --repair PACKAGES")
        raise typer.Exit(2)
    if from_run is not None and not from_run.is_file():
        _err(f"--from-run: no such data file: {from_run}")
        raise typer.Exit(2)
    try:
        names = RepairSettings(packages=tuple(packages.split(","))).packages
    except SettingsError as exc:
        _err(f"--repair: {exc}")
        raise typer.Exit(2) from None
    missing = [n for n in names if importlib.util.find_spec(n.split(".")[0]) is None]
    if missing:
        _err(f"--repair: no installed package named {', '.join(missing)}")
        raise typer.Exit(2)
    return repair_imports(names, unsafe=unsafe, from_run=str(from_run) if from_run else None)


def _package_folders(hook) -> list[str]:  # noqa: ANN001
    """The folders of the packages to repair (part of the project: breaks are reported at their lines)."""
    import importlib.util

    out = []
    for name in hook.settings.packages:
        top = importlib.util.find_spec(name.split(".")[0])
        for folder in (top.submodule_search_locations or []) if top else []:
            out.append(str(Path(folder, *name.split(".")[1:])))
    return out


def _load(data_file: Optional[Path]):  # -> RunData
    from mend.analyzers.runtime.data import DataFileError, load

    path = _data_path(data_file)
    try:
        return load(path)
    except DataFileError as exc:
        _err(str(exc))
        raise typer.Exit(2) from None


def report(
    data_file: Optional[Path] = typer.Option(None, "--data-file", help=DATA_FILE_HELP),
    output_format: str = typer.Option("table", "--format", "-f", help="table, json, sarif, github, junit or html."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write to this file instead of stdout."),
    no_static: bool = typer.Option(False, "--no-static", help="Do not match sites with static findings."),
    hide_library: bool = typer.Option(False, "--hide-library", help="Leave out sites with no project frame."),
) -> None:
    """Show the recorded graph breaks and recompiles, grouped by source site."""
    from mend.analyzers.runtime.mapping import findings
    from mend.analyzers.runtime.report import FORMATS, render, render_table

    if output_format not in FORMATS:
        _err(f"unknown format {output_format!r}; choose one of {', '.join(FORMATS)}")
        raise typer.Exit(2)
    data = _load(data_file)
    found = findings(data, use_static=not no_static, include_library=not hide_library)
    if output_format == "table":
        if output is not None:
            from rich.console import Console

            with output.open("w", encoding="utf-8") as fh:
                render_table(data, found, Console(file=fh, width=160))
                fh.write(_repaired_text(data))
        else:
            render_table(data, found)
            typer.echo(_repaired_text(data), nl=False)
        return
    text = render(data, found, output_format)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text + "\n", encoding="utf-8")
        _err(f"wrote {output}")
    else:
        typer.echo(text)


def _repaired_text(data) -> str:  # noqa: ANN001
    """The modules ``mend run --repair`` loaded repaired, and what was changed in each ("" when none)."""
    modules = getattr(data, "repaired", None) or []
    if not modules:
        return ""
    lines = [f"\nLoaded repaired at import ({len(modules)} module(s)):"]
    for m in modules:  # only module, path, status, applied and each change's code and line are required
        name, path = m.get("module", "?"), m.get("path", "?")
        applied = [a for a in m.get("applied") or [] if isinstance(a, dict)]
        if m.get("status") != "repaired":
            lines.append(f"  {name} ({path}): loaded unchanged, {m.get('error') or 'not repaired'}")
            continue
        lines.append(f"  {name} ({path}): {len(applied)} fix(es), {m.get('remaining', 0)} left")
        for a in applied:
            how = f" ({a['applicability']})" if a.get("applicability") else ""
            lines.append(f"    {path}:{a.get('line', '?')}: {a.get('code', '?')} {a.get('message', '')}".rstrip() + how)
    return "\n".join(lines) + "\n"


def gate(
    data_file: Optional[Path] = typer.Option(None, "--data-file", help=DATA_FILE_HELP),
    baseline: Optional[Path] = typer.Option(None, "--baseline", help="Compare with this baseline file instead of budgets."),
    update_baseline: bool = typer.Option(False, "--update-baseline", help="Write the current sites to --baseline and pass."),
    max_graph_breaks: Optional[int] = typer.Option(None, "--max-graph-breaks", min=0, help="Override the global budget."),
    max_recompiles: Optional[int] = typer.Option(None, "--max-recompiles", min=0, help="Override the global budget."),
    config: Optional[Path] = typer.Option(None, "--config", help="Read [tool.mend.gate] from this pyproject.toml."),
    ignore_run_status: bool = typer.Option(False, "--ignore-run-status",
                                           help="Judge the sites even when the recorded program exited "
                                                "non-zero or compiled nothing."),
) -> None:
    """Fail (exit 1) when recorded breaks or recompiles exceed the gate budgets (pyproject tool.mend.gate) or a baseline.

    A run whose program exited non-zero, or that compiled nothing, fails too (--ignore-run-status
    opts out). Exit codes: 0 within budget, 1 over budget or a failed run (the reasons and offending
    sites are listed), 2 missing or invalid data file, baseline or configuration.
    """
    from mend.analyzers.runtime import gate as g

    data = _load(data_file)
    problems = [] if ignore_run_status else g.run_problems(data)
    if problems:
        typer.echo("mend gate: FAILED")
        for problem in problems:
            typer.echo(f"  {problem}; a run like this passes no budget (--ignore-run-status to judge it anyway)")
        raise typer.Exit(1)
    try:
        if update_baseline:
            if baseline is None:
                _err("--update-baseline needs --baseline FILE")
                raise typer.Exit(2)
            doc = g.write_baseline(data, baseline)
            typer.echo(f"mend gate: wrote baseline {baseline} ({len(doc['breaks'])} break site(s), "
                       f"{len(doc['recompiles'])} recompile site(s))")
            return
        if baseline is not None:
            result = g.check_baseline(data, g.read_baseline(baseline))
        else:
            table, source = g.read_tool_config(Path.cwd(), config)
            cfg = g.parse_gate_config(table, source)
            result = g.check_budgets(data, cfg, max_graph_breaks, max_recompiles)
    except g.GateConfigError as exc:
        _err(str(exc))
        raise typer.Exit(2) from None
    if result.passed:
        typer.echo("mend gate: passed (" + "; ".join(result.checked) + ")")
        if result.fixed:
            typer.echo(f"  {len(result.fixed)} baseline site(s) no longer occur; run with --update-baseline to tighten it")
        return
    typer.echo("mend gate: FAILED")
    for v in result.violations:
        typer.echo(f"  {v.describe()}:")
        for site in v.sites:
            if hasattr(site, "gb_type"):
                what = f"{'frame skip' if site.frame_skip else 'graph break'} [{site.registry_id or '-'}] {site.gb_type}"
            else:
                what = f"recompile ({site.kind}) of {site.function}: {site.guard}"
            typer.echo(f"    {site.path}:{site.line}: {what} ({site.count}x)")
    raise typer.Exit(1)


def crosscheck(
    models: list[str] = typer.Argument(None, help="Model names to run (default: all). See --list."),
    list_models: bool = typer.Option(False, "--list", help="List the available models and exit."),
    output_format: str = typer.Option("table", "--format", "-f", help="table or json."),
    data_file: Optional[Path] = typer.Option(None, "--data-file", help="Also write the recorded runs to this data file."),
) -> None:
    """Run real models under the recorder and score `mend check` against the recorded break sites.

    Precision: of the static findings on lines the models executed inside compiled code, how many
    Dynamo really broke on. Recall: of the recorded break sites, how many the static analyzer flags.
    """
    from mend.analyzers.runtime import crosscheck as cc

    if list_models:
        for name in cc.MODELS:
            typer.echo(name)
        return
    try:
        result = cc.run(models or None, data_file=data_file)
    except cc.CrosscheckError as exc:
        _err(str(exc))
        raise typer.Exit(2) from None
    if output_format == "json":
        typer.echo(result.to_json())
    else:
        cc.print_table(result)
    raise typer.Exit(0)


def register(app: typer.Typer) -> None:
    """Add ``run``, ``report``, ``gate`` and ``crosscheck`` to ``app``."""
    app.command(
        "run",
        context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "allow_interspersed_args": False},
    )(run)
    app.command("report")(report)
    app.command("gate")(gate)
    app.command("crosscheck")(crosscheck)


if __name__ == "__main__":  # pragma: no cover
    sys.exit("use `mend run`")
