"""What a program tells its user, observed: stdout, stderr, logging records and warnings, in order.

``with Observer(roots) as obs: ...`` then ``obs.messages``: one ``[kind, name, level, text]`` per message,
in the order the program emitted them:

* ``stdout`` / ``stderr``: one message per line written to ``sys.stdout`` / ``sys.stderr`` (a line left
  open is closed when the block ends);
* ``log``: every record a logger hands to its handlers (``Logger.callHandlers``: it passed the logger's
  level and filters, so it is what the user's handlers see), with the logger's name and the level name;
* ``warning``: every ``warnings.warn`` (the filter is ``always`` inside the block, so a repeated warning
  is seen each time), with the category's name.

Messages that torch and the compiler emit (``torch.*`` loggers: ``torch._dynamo``, the structured trace...;
warnings raised from the compiler's files) are left out: they say how the program was compiled, and a repair that removes
a graph break changes them by design. Text is normalised so that runs in different folders compare: the
``roots`` given (a package copy's folder) become ``<root>`` and memory addresses ``0x?``; a traceback inside a
message (autograd's anomaly warning, ``Error detected in IndexPutBackward0. Traceback of forward call ...``) is
cut at ``Traceback``: its frames are where the code ran, Dynamo's resume functions at lines of the file, which a
repair moves by design.

:func:`compare` sets a repaired run's messages against the original's: kept (in both, same relative order),
lost, added and reordered. No torch import.
"""

from __future__ import annotations

import io
import logging
import re
import sys
import warnings
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

# loggers and files of torch and the compiler stack: their messages describe the compilation (and torch's
# structured trace, ``torch.__trace``), not the program
COMPILER_LOGGERS = ("torch.", "mend.compiler", "mend.analyzers")
COMPILER_FILES = tuple(f"/torch/{p}/" for p in ("_dynamo", "_inductor", "_functorch", "fx", "_subclasses", "_guards",
                                                "_export", "export", "_higher_order_ops", "_logging"))
_ADDRESS = re.compile(r"0x[0-9a-fA-F]{4,}")
_TRACEBACK = re.compile(r"\s*Traceback\b.*\bFile \"", re.S)
# a line of torch's own log handler (``W1129 02:36:19.661000 13456 path/torch/_dynamo/x.py:1841] [0/0] ...``): the
# handler is made at the first compile, on the sys.stderr of that moment (the observer's stream), so its lines
# reach the stream and not Logger.callHandlers; each carries a time and a process id, so it never compares
_TORCH_LOG_LINE = re.compile(r"[DIWEC]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ ([^\s\]]+):\d+\] ")

Message = list  # [kind, name, level, text]


class _Stream(io.TextIOBase):
    """A text stream that turns each written line into a message."""

    def __init__(self, kind: str, sink: Observer) -> None:
        self.kind, self.sink, self.buf = kind, sink, ""

    def writable(self) -> bool:
        return True

    def write(self, s: str) -> int:
        self.buf += str(s)
        while "\n" in self.buf:
            line, self.buf = self.buf.split("\n", 1)
            self.sink.add(self.kind, "", "", line)
        return len(s)

    def flush(self) -> None:
        pass

    def close_line(self) -> None:
        if self.buf:
            self.sink.add(self.kind, "", "", self.buf)
            self.buf = ""

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return "utf-8"

    def isatty(self) -> bool:
        return False


class Observer:
    """Records every message a block emits (see the module's docstring); nestable, not thread-aware."""

    def __init__(self, roots: Sequence[str] = ()) -> None:
        self.roots = sorted((r.rstrip("/") for r in roots if r), key=len, reverse=True)
        self.messages: list[Message] = []
        self._saved: dict[str, Any] = {}

    def normalise(self, text: str) -> str:
        for r in self.roots:
            text = text.replace(r, "<root>")
        cut = _TRACEBACK.search(text)
        if cut is not None:
            text = text[:cut.start()]
        return _ADDRESS.sub("0x?", text)

    def add(self, kind: str, name: str, level: str, text: str) -> None:
        if kind in ("stdout", "stderr"):
            m = _TORCH_LOG_LINE.match(text)
            if m and ("/" + m.group(1)).replace("\\", "/").find("/torch/") >= 0:
                return
        self.messages.append([kind, name, level, self.normalise(text)])

    def __enter__(self) -> Observer:
        observer = self
        self._out, self._err = _Stream("stdout", self), _Stream("stderr", self)
        self._saved = {"stdout": sys.stdout, "stderr": sys.stderr, "call": logging.Logger.callHandlers}
        original_call = logging.Logger.callHandlers

        def call_handlers(logger: logging.Logger, record: logging.LogRecord) -> None:
            if record.name != "torch" and not record.name.startswith(COMPILER_LOGGERS):
                try:
                    text = record.getMessage()
                except Exception as exc:  # a record whose arguments do not format: what logging would print
                    text = f"<unformattable: {type(exc).__name__}> {record.msg!r}"
                observer.add("log", record.name, record.levelname, text)
            original_call(logger, record)

        def show(message: Any, category: type, filename: str, lineno: int, file: Any = None, line: Any = None) -> None:
            if not any(p in str(filename).replace("\\", "/") for p in COMPILER_FILES):
                observer.add("warning", category.__name__, "", str(message))

        self._warnings = warnings.catch_warnings()
        self._warnings.__enter__()
        warnings.simplefilter("always")
        warnings.showwarning = show  # catch_warnings restores it
        logging.Logger.callHandlers = call_handlers  # type: ignore[method-assign]
        sys.stdout, sys.stderr = self._out, self._err
        return self

    def __exit__(self, *exc: object) -> None:
        self._out.close_line()
        self._err.close_line()
        sys.stdout, sys.stderr = self._saved["stdout"], self._saved["stderr"]
        logging.Logger.callHandlers = self._saved["call"]  # type: ignore[method-assign]
        self._warnings.__exit__(*exc)


@dataclass
class MessageDiff:
    """A run's messages against the reference's: ``kept`` in both and in the same relative order."""

    reference: int = 0
    observed: int = 0
    kept: int = 0
    lost: int = 0
    added: int = 0
    reordered: int = 0
    first: list[str] = field(default_factory=list)  # up to three examples: "lost: [log] name WARNING: text"

    @property
    def ok(self) -> bool:
        return not (self.lost or self.added or self.reordered)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _key(m: Sequence[str]) -> tuple[str, ...]:
    return tuple(str(x) for x in m)


def _show(what: str, m: Sequence[str]) -> str:
    kind, name, level, text = (list(m) + ["", "", "", ""])[:4]
    head = " ".join(x for x in (name, level) if x)
    return f"{what}: [{kind}] {head + ': ' if head else ''}{text[:160]}"


def _lcs(a: list[tuple[str, ...]], b: list[tuple[str, ...]]) -> int:
    """Length of the longest common subsequence (messages are few: the quadratic table is fine; long runs
    are cut at 2,000 messages each)."""
    a, b = a[:2000], b[:2000]
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def compare(reference: Sequence[Sequence[str]], observed: Sequence[Sequence[str]]) -> MessageDiff:
    """``observed`` against ``reference``: lost (in the reference, not observed, counted with multiplicity),
    added (the reverse), reordered (in both, but out of the reference's order: common messages less the
    longest common subsequence)."""
    ref, obs = [_key(m) for m in reference], [_key(m) for m in observed]
    cr, co = Counter(ref), Counter(obs)
    lost, added = cr - co, co - cr
    common = sum((cr & co).values())
    ref_common = [m for m in ref if m in co]
    obs_common = [m for m in obs if m in cr]
    in_order = _lcs(ref_common, obs_common)
    d = MessageDiff(reference=len(ref), observed=len(obs), kept=in_order, lost=sum(lost.values()),
                    added=sum(added.values()), reordered=common - in_order)
    d.first = ([_show("lost", m) for m in lost][:3] + [_show("added", m) for m in added][:3])[:3]
    if not d.first and d.reordered:
        d.first = [f"reordered: {d.reordered} of {common} messages out of the original's order"]
    return d
