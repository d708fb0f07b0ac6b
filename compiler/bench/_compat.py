"""Everything ``mend bench`` needs from torch's private APIs, in one place.

Only the worker process imports this module (it imports torch). Every private name used by the
benchmark is reached through a function here, so a torch upgrade is fixed in one file. Supported:
torch >= 2.8; tested on 2.13.

Counting follows the measured recipe (``dynamo.md`` sections 2 and 8): graph breaks come from Dynamo's
graph-break artifact loggers (one record per break per compile), graphs from Dynamo's own
``unique_graphs`` counter (one per backend call, whatever the backend), frame skips from the
``frames`` counters, recompiles and compile time from the compilation metrics.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any

import torch

_BREAK_LOGGERS = (
    "torch._dynamo.symbolic_convert.__graph_breaks",
    "torch._dynamo.exc.__graph_breaks",
)
_AT = re.compile(r"in user code at (?P<file>.+?):(?P<line>\d+)")
_REASON = re.compile(r"Graph Break Reason:\s*(?P<reason>.*)", re.DOTALL)


@dataclass
class BreakSite:
    file: str
    line: int
    reason: str  # the gb_type line, e.g. "Data-dependent branching"


class _BreakHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.events: list[BreakSite] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = record.getMessage()
        except Exception:  # a malformed record must never break the measured program
            return
        at = _AT.search(text)
        reason_match = _REASON.search(text)
        reason = reason_match.group("reason").strip() if reason_match else ""
        if not reason:
            # CALL-type breaks carry the gb_type on the first non-empty line after the prefix.
            reason = next((ln.strip() for ln in text.splitlines()[1:] if ln.strip()), text.strip())
        reason = _first_meaningful_line(reason)
        if at:
            self.events.append(BreakSite(at.group("file"), int(at.group("line")), reason))
        else:
            self.events.append(BreakSite("?", 0, reason))


def _first_meaningful_line(reason: str) -> str:
    prefixes = ("Encountered graph break when attempting to trace", "Failed to handle graph break gracefully")
    lines = [ln.strip() for ln in reason.splitlines() if ln.strip()]
    for ln in lines:
        if not ln.startswith(prefixes):
            return ln[:200]
    return (lines[0] if lines else reason)[:200]


class Counter:
    """Counts graphs, breaks, frame skips, recompiles and compile time in this process."""

    def __init__(self) -> None:
        self._handler = _BreakHandler()
        self._loggers: list[tuple[logging.Logger, int, bool]] = []

    def start(self) -> None:
        from torch._dynamo import utils

        utils.counters.clear()
        if hasattr(utils, "clear_compilation_metrics"):
            utils.clear_compilation_metrics()
        if hasattr(utils, "set_compilation_metrics_limit"):
            utils.set_compilation_metrics_limit(100_000)
        utils.compilation_time_metrics.clear()
        for name in _BREAK_LOGGERS:
            lg = logging.getLogger(name)
            self._loggers.append((lg, lg.level, lg.propagate))
            lg.setLevel(logging.DEBUG)
            lg.propagate = False
            lg.addHandler(self._handler)

    def stop(self) -> None:
        for lg, level, propagate in self._loggers:
            lg.removeHandler(self._handler)
            lg.setLevel(level)
            lg.propagate = propagate
        self._loggers.clear()

    # -- readings ---------------------------------------------------------------------------------
    @property
    def break_events(self) -> list[BreakSite]:
        return list(self._handler.events)

    def graphs(self) -> int:
        from torch._dynamo.utils import counters

        return int(counters["stats"]["unique_graphs"])

    def frames_skipped(self) -> int:
        from torch._dynamo.utils import counters

        return max(0, int(counters["frames"]["total"]) - int(counters["frames"]["ok"]))

    def compilations(self) -> list[dict[str, Any]]:
        """One entry per frame compile: id, frame, recompile reason."""
        from torch._dynamo.utils import get_compilation_metrics

        out = []
        for m in get_compilation_metrics():
            out.append(
                {
                    "compile_id": str(getattr(m, "compile_id", "")),
                    "co_name": getattr(m, "co_name", None),
                    "co_filename": getattr(m, "co_filename", None),
                    "co_firstlineno": getattr(m, "co_firstlineno", None),
                    "recompile_reason": getattr(m, "recompile_reason", None),
                }
            )
        return out

    def compile_seconds(self) -> float:
        """Seconds spent in Dynamo frame compilation (tracing plus the backend), all frames."""
        from torch._dynamo.utils import compilation_time_metrics

        return float(sum(compilation_time_metrics.get("_compile.compile_inner", ())))


def registry_id(gb_type: str) -> str | None:
    """The graph-break registry id (``GB0170``) of a gb_type string, when this torch has the registry."""
    global _GB_MAP
    if _GB_MAP is None:
        try:
            from torch._dynamo.exc import _load_gb_type_to_gb_id_map

            _GB_MAP = dict(_load_gb_type_to_gb_id_map())
        except Exception:  # older torch: no registry
            _GB_MAP = {}
    return _GB_MAP.get(gb_type)


_GB_MAP: dict[str, str] | None = None


def recompiles(compilations: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Compilations that are a second or later compile of the same frame (compile id ``F/N``, N > 0)."""
    out = []
    for c in compilations:
        m = re.search(r"(\d+)/(\d+)", c["compile_id"] or "")
        if m and int(m.group(2)) > 0:
            out.append(c)
    return out


def unwrap_compiled(target: Any) -> tuple[Any, bool]:
    """Return the original callable of a ``torch.compile``-d module or function, and whether it was one."""
    from torch._dynamo.eval_frame import OptimizedModule

    if isinstance(target, OptimizedModule):
        return target._orig_mod, True
    orig = getattr(target, "_torchdynamo_orig_callable", None)
    if orig is not None:
        return orig, True
    return target, False


class BackendUnavailable(Exception):
    """A backend that cannot be loaded in this process; the message says why."""


def resolve_backend(name: str) -> str:
    """Check that a Dynamo backend can be loaded; raise :class:`BackendUnavailable` if not."""
    from torch._dynamo import list_backends, lookup_backend

    if name == "mend":
        try:
            from mend.compiler.backend import mend_backend  # noqa: F401  (the bundled compiler)
        except Exception as exc:
            raise BackendUnavailable(f"the bundled compiler is not importable ({type(exc).__name__}: {exc})") from exc
    try:
        lookup_backend(name)
    except Exception as exc:
        known = ", ".join(sorted(list_backends(exclude_tags=())))
        raise BackendUnavailable(f"backend {name!r} cannot be loaded ({type(exc).__name__}: {exc}); known: {known}") from exc
    return name


def reset() -> None:
    torch._dynamo.reset()


def cudagraph_step() -> None:
    mark = getattr(torch.compiler, "cudagraph_mark_step_begin", None)
    if mark is not None:
        mark()
