"""Commands registered by this module are under construction."""

from __future__ import annotations

import typer


def register(app: typer.Typer) -> None:
    """Add this module's commands to ``app`` (none yet)."""
