"""The ``mend`` command line: a thin typer app over the library API.

Each group of commands lives in its own module with a ``register(app)`` function, so that the
analyzer, rewriter, runtime and benchmark commands stay independent.
"""

from __future__ import annotations

import importlib

import typer

from mend.version import __version__

COMMAND_MODULES = (
    "mend.cli.check_cmd",  # mend check, mend rule
    "mend.cli.fix_cmd",  # mend fix
    "mend.cli.runtime_cmd",  # mend run, mend report, mend gate
    "mend.cli.bench_cmd",  # mend bench
    "mend.cli.repair_cmd",  # mend repair-cache
)

app = typer.Typer(
    name="mend",
    help="Find, repair and prove away torch.compile graph breaks and recompiles.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    # Help texts name config tables like [tool.mend]: print them literally, not as rich markup.
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version_callback(value: bool) -> None:
    if value:
        typer.echo(f"mend {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", "-V", callback=_version_callback, is_eager=True, help="Print the version."
    ),
) -> None:
    """mend: whole-graph torch.compile, found, repaired and proven."""


for _name in COMMAND_MODULES:
    importlib.import_module(_name).register(app)


def main() -> None:
    app()


if __name__ == "__main__":
    main()
