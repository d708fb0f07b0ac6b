"""Every private torch access of the runtime recorder, in one place.

Supported torch: >= 2.8 (tested on 2.13 and 2.11). The recorder needs four facts from Dynamo and
takes each from the narrowest private hook that carries it (measured in
``shared/reference/dynamo.md`` sections 2, 7 and 8):

* **graph breaks**: ``InstructionTranslatorBase.log_graph_break(self, code_options, reason, exc)`` is
  called once per break, including breaks that make Dynamo skip the whole frame (the reason then
  starts with "Failed to handle graph break gracefully"). ``exc.gb_type`` and ``exc.real_stack``
  give the type and the user stack; ``exc.logged`` marks a break already reported.
* **graphs**: ``OutputGraph.call_user_compiler(gm, example_inputs)`` is the one place a graph is
  handed to the backend; ``--fast`` swaps ``OutputGraph.compiler_fn`` there for an eager forward.
* **compiles and recompiles**: each frame compile ends in ``MetricsContext.__exit__``, which appends a
  ``CompilationMetrics`` record (``compile_id``, ``co_*``, ``recompile_reason``, ``fail_type``...).
* **registry ids**: ``torch._dynamo.exc._load_gb_type_to_gb_id_map()``.

The recorder never changes Dynamo's configuration, its logging state or its caches; ``torch._dynamo.reset``
and ``explain`` are never called by it. (``mend bench``'s workers own their process: the last section,
used by them only, counts from Dynamo's logs and counters and resets Dynamo between compiles.) The hooks
are installed once, shared by every active listener, and removed when the last listener leaves. A hook
never lets its own failure reach the user's program: errors are kept in :data:`hook_errors`.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch._dynamo  # noqa: F401  (makes the submodules below importable on every version)
from torch._dynamo import output_graph as _og
from torch._dynamo import symbolic_convert as _sc
from torch._dynamo import utils as _du
from torch._dynamo.eval_frame import OptimizedModule

try:  # torch >= 2.6
    from torch._dynamo import metrics_context as _mc
except ImportError:  # pragma: no cover - older torch
    _mc = None

TORCH_VERSION = torch.__version__.split("+")[0]

Frame = tuple[str, int, str]  # (filename, lineno, function)
StackEntry = tuple[str, int, str, str]  # (filename, lineno, function, line text)

_lock = threading.RLock()
_listeners: list[Any] = []
_originals: dict[str, Any] = {}
hook_errors: list[str] = []


def _note_error(where: str) -> None:
    if len(hook_errors) < 50:
        hook_errors.append(f"{where}: {traceback.format_exc(limit=3)}")


# --------------------------------------------------------------------------------------------------
# facts
# --------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=1)
def gb_type_to_id() -> dict[str, str]:
    """gb_type (exact string, historical names included) -> registry id ("GB0059")."""
    try:
        from torch._dynamo.exc import _load_gb_type_to_gb_id_map

        return {str(k): str(v) for k, v in _load_gb_type_to_gb_id_map().items()}
    except Exception:  # older torch without a registry: ids stay unknown
        return {}


def registry_id(gb_type: str | None) -> str | None:
    if not gb_type:
        return None
    return gb_type_to_id().get(gb_type)


def current_compile_id() -> str | None:
    try:
        cid = torch._guards.CompileContext.current_compile_id()
    except Exception:
        return None
    return None if cid is None else str(cid)


def _stack_entries(stack: Any) -> list[StackEntry]:
    out: list[StackEntry] = []
    for fs in stack or ():
        try:
            out.append((str(fs.filename), int(fs.lineno or 0), str(fs.name), (fs.line or "").strip()))
        except Exception:
            continue
    return out


def _stack_above_dynamo() -> list[StackEntry]:
    try:
        from torch._dynamo.exc import get_stack_above_dynamo

        return _stack_entries(get_stack_above_dynamo())
    except Exception:
        return []


def _root_code(tx: Any) -> Any:
    root = tx
    for _ in range(1000):
        parent = getattr(root, "parent", None)
        if parent is None:
            break
        root = parent
    return getattr(root, "f_code", None)


def traced_code() -> list[tuple[str, int, int, str]]:
    """Code Dynamo traced in the current compile (root frame and inlined functions).

    Each entry: (filename, first line, last line, function name).
    """
    try:
        codes = torch._guards.TracingContext.get_traced_code() or []
    except Exception:
        return []
    out = []
    for code in codes:
        entry = _code_spans.get(code)
        if entry is None:
            try:
                lines = [ln for _, _, ln in code.co_lines() if ln is not None]
                entry = (str(code.co_filename), int(code.co_firstlineno), max(lines or [code.co_firstlineno]), str(code.co_name))
            except Exception:
                continue
            _code_spans[code] = entry
        out.append(entry)
    return out


_code_spans: dict[Any, tuple[str, int, int, str]] = {}


def _frame_of(code: Any) -> Frame | None:
    if code is None:
        return None
    return (str(code.co_filename), int(code.co_firstlineno), str(code.co_name))


# --------------------------------------------------------------------------------------------------
# hooks
# --------------------------------------------------------------------------------------------------
def _dispatch(method: str, info: dict[str, Any]) -> None:
    for listener in list(_listeners):
        try:
            getattr(listener, method)(info)
        except Exception:
            _note_error(f"listener.{method}")


def _log_graph_break_hook(orig: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(orig)
    def log_graph_break(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            reason = kwargs.get("reason", args[1] if len(args) > 1 else "")
            exc = kwargs.get("exc", args[2] if len(args) > 2 else None)
            if _listeners and exc is not None and not getattr(exc, "logged", False):
                real = getattr(exc, "real_stack", None)
                if real is None:
                    real = torch._guards.TracingContext.extract_stack()
                gb_type = getattr(exc, "gb_type", None) or type(exc).__name__
                _dispatch(
                    "on_break",
                    {
                        "gb_type": str(gb_type),
                        "reason": str(reason or ""),
                        "real_stack": _stack_entries(real),
                        "above": _stack_above_dynamo,  # called only when needed, during the event
                        "frame": _frame_of(_root_code(self)),
                        "compile_id": current_compile_id(),
                        "traced": traced_code() if _line_listeners else (),
                    },
                )
        except Exception:
            _note_error("log_graph_break")
        return orig(self, *args, **kwargs)

    return log_graph_break


def _fast_compiler(gm: Any, example_inputs: Any) -> Any:
    """The ``--fast`` backend: run the captured graph eagerly (same as ``backend="eager"``)."""
    return gm.forward


def _call_user_compiler_hook(orig: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(orig)
    def call_user_compiler(self: Any, gm: Any, example_inputs: Any) -> Any:
        fast = any(getattr(listener, "fast", False) for listener in list(_listeners))
        if _listeners:
            try:
                _dispatch(
                    "on_graph",
                    {
                        "frame": _frame_of(getattr(getattr(self, "root_tx", None), "f_code", None)),
                        "compile_id": current_compile_id(),
                        "nodes": sum(1 for n in gm.graph.nodes if n.op.startswith("call_")),
                        "traced": traced_code() if _line_listeners else (),
                    },
                )
            except Exception:
                _note_error("call_user_compiler")
        if not fast or not hasattr(self, "compiler_fn"):
            return orig(self, gm, example_inputs)
        saved = self.compiler_fn
        self.compiler_fn = _fast_compiler
        try:
            return orig(self, gm, example_inputs)
        finally:
            self.compiler_fn = saved

    return call_user_compiler


def _metrics_exit_hook(orig: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(orig)
    def __exit__(self: Any, *args: Any) -> Any:
        store = getattr(_du, "_compilation_metrics", None)
        last = store[-1] if store else None
        result = orig(self, *args)
        if not _listeners:
            return result
        try:
            store = getattr(_du, "_compilation_metrics", None)
            if store and store[-1] is not last:
                m = store[-1]
                if getattr(m, "is_forward", True) is False or getattr(m, "is_runtime", False):
                    return result
                start, end = getattr(m, "start_time_us", None), getattr(m, "end_time_us", None)
                if start is not None and end is not None:
                    seconds = max(0.0, (end - start) / 1e6)
                else:
                    seconds = float(getattr(m, "entire_frame_compile_time_s", None) or 0.0)
                frame = None
                if getattr(m, "co_filename", None):
                    frame = (str(m.co_filename), int(m.co_firstlineno or 0), str(m.co_name))
                _dispatch(
                    "on_compile",
                    {
                        "compile_id": None if m.compile_id is None else str(m.compile_id),
                        "frame": frame,
                        "recompile_reason": getattr(m, "recompile_reason", None),
                        "fail_type": getattr(m, "fail_type", None),
                        "fail_reason": getattr(m, "fail_reason", None),
                        "has_guarded_code": getattr(m, "has_guarded_code", None),
                        "time_s": seconds,
                    },
                )
        except Exception:
            _note_error("compilation metrics")
        return result

    return __exit__


_TARGETS: list[tuple[str, Any, str, Callable[[Callable[..., Any]], Callable[..., Any]]]] = [
    ("log_graph_break", _sc.InstructionTranslatorBase, "log_graph_break", _log_graph_break_hook),
    ("call_user_compiler", _og.OutputGraph, "call_user_compiler", _call_user_compiler_hook),
]
if _mc is not None:
    _TARGETS.append(("metrics_exit", _mc.MetricsContext, "__exit__", _metrics_exit_hook))


def _starts_line_hook(orig: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(orig)
    def starts_line(self: Any, lineno: int) -> Any:
        try:
            filename = self.f_code.co_filename
            for listener in _line_listeners:
                listener.on_line(filename, lineno)
        except Exception:
            _note_error("starts_line")
        return orig(self, lineno)

    return starts_line


_line_listeners: list[Any] = []


def missing_hooks() -> list[str]:
    """Names of the hooks this torch does not offer (the recorder then reports less)."""
    names = [name for name, owner, attr, _ in _TARGETS if not hasattr(owner, attr)]
    if _mc is None:
        names.append("metrics_exit")
    return names


def _install() -> None:
    for name, owner, attr, make in _TARGETS:
        orig = getattr(owner, attr, None)
        if orig is None or name in _originals:
            continue
        _originals[name] = orig
        setattr(owner, attr, make(orig))


def _uninstall() -> None:
    for name, owner, attr, _ in _TARGETS:
        if name in _originals:
            setattr(owner, attr, _originals.pop(name))


def add_listener(listener: Any) -> None:
    """Start sending events to ``listener`` (``on_break``, ``on_graph``, ``on_compile`` methods).

    A listener with ``track_lines = True`` also gets ``on_line(filename, lineno)`` for every source
    line Dynamo traces (used by the cross-check; it costs a call per traced line).
    """
    with _lock:
        if not _listeners:
            _install()
        _listeners.append(listener)
        if getattr(listener, "track_lines", False):
            if not _line_listeners and hasattr(_sc.InstructionTranslatorBase, "starts_line"):
                _originals["starts_line"] = _sc.InstructionTranslatorBase.starts_line
                _sc.InstructionTranslatorBase.starts_line = _starts_line_hook(_originals["starts_line"])
            _line_listeners.append(listener)


def remove_listener(listener: Any) -> None:
    with _lock:
        if listener in _listeners:
            _listeners.remove(listener)
        if listener in _line_listeners:
            _line_listeners.remove(listener)
            if not _line_listeners and "starts_line" in _originals:
                _sc.InstructionTranslatorBase.starts_line = _originals.pop("starts_line")
        if not _listeners:
            _uninstall()


# --------------------------------------------------------------------------------------------------
# parsing Dynamo's texts
# --------------------------------------------------------------------------------------------------
_RESUME = re.compile(r"^torch_dynamo_resume_in_(.+)_at_(\d+)$")
_USER_FRAME = re.compile(r'File "([^"]+)", line (\d+), in (\S+)')


def original_function(name: str) -> tuple[str, int | None]:
    """``torch_dynamo_resume_in_f_at_8`` -> ("f", 8); other names come back unchanged."""
    at: int | None = None
    for _ in range(100):
        m = _RESUME.match(name)
        if not m:
            break
        name, line = m.group(1), int(m.group(2))
        at = line if at is None else at
    return name, at


def parse_reason(reason: str, fallback_gb_type: str) -> dict[str, Any]:
    """Split a break reason into root cause and wrapper (dynamo.md section 3).

    The root cause is the first gb_type in the text (the line before ``  Explanation:``); the
    outermost one is the last. Returns gb_type, outer_gb_type, message (Explanation), hints.
    """
    lines = reason.splitlines()
    blocks: list[dict[str, Any]] = []
    for i, line in enumerate(lines[:-1]):
        if lines[i + 1].startswith("  Explanation:") and line.strip():
            explanation = lines[i + 1].split("Explanation:", 1)[1].strip()
            hints: list[str] = []
            for follow in lines[i + 2 :]:
                if follow.startswith("  Hint:"):
                    hints.append(follow.split("Hint:", 1)[1].strip())
                elif follow.startswith("  Explanation:") or not follow.startswith(" "):
                    break
            blocks.append({"gb_type": line.strip(), "message": explanation, "hints": hints})
    if not blocks:
        first = next((line.strip() for line in lines if line.strip()), fallback_gb_type)
        return {"gb_type": fallback_gb_type, "outer_gb_type": None, "message": first, "hints": []}
    root, outer = blocks[0], blocks[-1]
    known = gb_type_to_id()
    if known and root["gb_type"] not in known and fallback_gb_type in known:
        root = {"gb_type": fallback_gb_type, "message": root["message"], "hints": root["hints"]}
    return {
        "gb_type": root["gb_type"],
        "outer_gb_type": outer["gb_type"] if outer["gb_type"] != root["gb_type"] else None,
        "message": root["message"],
        "hints": root["hints"],
    }


def parse_recompile_reason(text: str) -> dict[str, Any]:
    """``"0/3: self.k == 3  # self.k += 1  # m.py:71 in forward (HINT...)\\nUser stack trace:..."``.

    Returns guard (the expression), text (reason without the compile id) and user_frames
    [(file, line, function)] from the "User stack trace" part.
    """
    first = text.splitlines()[0] if text else ""
    body = re.sub(r"^\s*\d+/\d+:\s*", "", first)
    guard = body.split("#", 1)[0].strip()
    frames = [(m.group(1), int(m.group(2)), m.group(3)) for m in _USER_FRAME.finditer(text)]
    cleaned = re.sub(r"\s{2,}#", "  #", body).strip()
    return {"guard": guard, "text": cleaned, "user_frames": frames}


# --------------------------------------------------------------------------------------------------
# mend bench: counts from Dynamo's logs and counters (a bench worker owns its process)
# --------------------------------------------------------------------------------------------------
# Counting follows the measured recipe (dynamo.md sections 2 and 8): graph breaks come from Dynamo's
# graph-break artifact loggers (one record per break per compile), graphs from Dynamo's own
# ``unique_graphs`` counter (one per backend call, whatever the backend), frame skips from the ``frames``
# counters, recompiles and compile time from the compilation metrics.
_BREAK_LOGGERS = (
    "torch._dynamo.symbolic_convert.__graph_breaks",
    "torch._dynamo.exc.__graph_breaks",
)
_AT = re.compile(r"in user code at (?P<file>.+?):(?P<line>\d+)")
_REASON = re.compile(r"Graph Break Reason:\s*(?P<reason>.*)", re.DOTALL)


@dataclass
class LoggedBreak:
    file: str
    line: int
    reason: str  # the gb_type line, e.g. "Data-dependent branching"


class _BreakLogHandler(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.events: list[LoggedBreak] = []

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
            self.events.append(LoggedBreak(at.group("file"), int(at.group("line")), reason))
        else:
            self.events.append(LoggedBreak("?", 0, reason))


def _first_meaningful_line(reason: str) -> str:
    prefixes = ("Encountered graph break when attempting to trace", "Failed to handle graph break gracefully")
    lines = [ln.strip() for ln in reason.splitlines() if ln.strip()]
    for ln in lines:
        if not ln.startswith(prefixes):
            return ln[:200]
    return (lines[0] if lines else reason)[:200]


class DynamoCounts:
    """Counts graphs, breaks, frame skips, recompiles and compile time in this process, from Dynamo's
    logs and counters (:meth:`start` clears the counters and attaches to the graph-break loggers)."""

    def __init__(self) -> None:
        self._handler = _BreakLogHandler()
        self._loggers: list[tuple[logging.Logger, int, bool]] = []

    def start(self) -> None:
        _du.counters.clear()
        if hasattr(_du, "clear_compilation_metrics"):
            _du.clear_compilation_metrics()
        if hasattr(_du, "set_compilation_metrics_limit"):
            _du.set_compilation_metrics_limit(100_000)
        _du.compilation_time_metrics.clear()
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

    @property
    def break_events(self) -> list[LoggedBreak]:
        return list(self._handler.events)

    def graphs(self) -> int:
        return int(_du.counters["stats"]["unique_graphs"])

    def frames_skipped(self) -> int:
        return max(0, int(_du.counters["frames"]["total"]) - int(_du.counters["frames"]["ok"]))

    def compilations(self) -> list[dict[str, Any]]:
        """One entry per frame compile: id, frame, recompile reason."""
        out = []
        for m in _du.get_compilation_metrics():
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
        return float(sum(_du.compilation_time_metrics.get("_compile.compile_inner", ())))


def unwrap_compiled(target: Any) -> tuple[Any, bool]:
    """The original callable of a ``torch.compile``-d module or function, and whether it was one."""
    if isinstance(target, OptimizedModule):
        return target._orig_mod, True
    orig = getattr(target, "_torchdynamo_orig_callable", None)
    if orig is not None:
        return orig, True
    return target, False


def lookup_backend(name: str) -> Any:
    """The Dynamo backend registered as ``name``; raises when it cannot be loaded."""
    return torch._dynamo.lookup_backend(name)


def backend_names() -> list[str]:
    """Every registered Dynamo backend name, sorted."""
    return sorted(torch._dynamo.list_backends(exclude_tags=()))


def reset_dynamo() -> None:
    """Forget every compiled frame and cache (``torch._dynamo.reset()``)."""
    torch._dynamo.reset()
