"""``mend bench``: what a repair bought, measured before and after, on several backends.

Public API::

    from mend.bench import Settings, run, BenchError
    result = run(Settings(harness="examples/transformer_block.py:harness", fixed="/tmp/fixed"))

``result`` is the JSON document described in ``docs/bench.md`` and validated by ``schema.json`` in this
package (``load_schema()``); ``report`` renders it (rich table, comparison with an older run) and
``chart`` draws it (self-contained HTML with inline SVG; PNG with matplotlib when installed).

This package imports torch only inside the worker processes (and, for ``--device auto``, to ask whether
CUDA is there), never at import time.
"""

from __future__ import annotations

import json
from importlib import resources
from pathlib import Path
from typing import Any

from mend.bench.runner import NOTE, SCHEMA_NAME, SCHEMA_VERSION, BenchError, Settings, run

__all__ = [
    "NOTE",
    "SCHEMA_NAME",
    "SCHEMA_VERSION",
    "BenchError",
    "Settings",
    "load_result",
    "load_schema",
    "run",
]


def load_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a ``mend bench --json`` document."""
    return json.loads(resources.files(__package__).joinpath("schema.json").read_text())


def load_result(path: str | Path) -> dict[str, Any]:
    """Read a ``mend bench --json`` file; raise :class:`BenchError` with a clear message if it is not one."""
    p = Path(path)
    try:
        doc = json.loads(p.read_text())
    except OSError as exc:
        raise BenchError(f"cannot read {p}: {exc.strerror or exc}") from exc
    except ValueError as exc:
        raise BenchError(f"{p} is not JSON: {exc}") from exc
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA_NAME:
        raise BenchError(f"{p} is not a mend bench result (no \"schema\": \"{SCHEMA_NAME}\")")
    if doc.get("version") != SCHEMA_VERSION:
        raise BenchError(
            f"{p} has mend bench schema version {doc.get('version')!r}; this mend reads version {SCHEMA_VERSION}"
        )
    if not isinstance(doc.get("results"), list):
        raise BenchError(f"{p} has no \"results\" list")
    return doc
