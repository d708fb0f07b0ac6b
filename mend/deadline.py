"""Bounds on the work one file takes: its time, checked cooperatively, and the code ``mend fix`` parses.

``mend check`` and ``mend fix`` bound the time spent on each file (``MEND_FILE_TIME_LIMIT``, the settings
table): no signal or thread interrupts the work (``-j`` runs it in worker processes, and a signal could land
in the middle of a write). Instead the loops that grow with a file (each function walked, each statement,
each finding planned, each strategy tried, each round of repairs) call :func:`check`, which raises
:class:`TimeLimit` once the current file's time is up. :func:`bounded` sets that time for a block; the bound
lives in a context variable, so an inner block never extends an outer one and each worker has its own.

Standard library only (the static analyzer imports it).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from contextvars import ContextVar
from typing import NamedTuple

from mend import settings


class TimeLimit(BaseException):
    """The current file's work ran past its bound. A ``BaseException`` (as ``KeyboardInterrupt``): the
    handlers of ``Exception`` that keep a run going past one rule's or strategy's bug do not swallow it."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"took longer than the {seconds:g} s limit ({settings.FILE_TIME_LIMIT.name})")
        self.seconds = seconds


class TooLarge(Exception):
    """A file whose repair would hand LibCST more code than ``MEND_FIX_MAX_BYTES`` allows."""


def check_size(chars: int) -> None:
    """Raise :class:`TooLarge` when ``chars`` characters of code are more than LibCST may take in one file."""
    limit = settings.FIX_MAX_BYTES.get()
    if limit and limit > 0 and chars > limit:
        raise TooLarge(f"its repairs involve {chars:,} characters of code, more than the {limit:,} mend fix "
                       f"parses in one file ({settings.FIX_MAX_BYTES.name}; LibCST holds about 300 bytes of memory "
                       "per character)")


class _Bound(NamedTuple):
    end: float  # time.monotonic() after which check() raises
    seconds: float  # the limit, for the message


_BOUND: ContextVar[_Bound | None] = ContextVar("mend_file_deadline", default=None)


def limit() -> float | None:
    """The per-file limit in seconds the settings give now; None for no limit (0 or less)."""
    seconds = settings.FILE_TIME_LIMIT.get()
    return seconds if seconds > 0 else None


@contextlib.contextmanager
def bounded(seconds: float | None) -> Iterator[None]:
    """Bound the block to ``seconds`` from now (None: no bound of its own); an enclosing bound that ends
    sooner stays in force."""
    outer = _BOUND.get()
    bound = outer
    if seconds is not None:
        end = time.monotonic() + seconds
        if outer is None or end < outer.end:
            bound = _Bound(end, seconds)
    token = _BOUND.set(bound)
    try:
        yield
    finally:
        _BOUND.reset(token)


def check() -> None:
    """Raise :class:`TimeLimit` when the bound of the enclosing :func:`bounded` block has passed."""
    bound = _BOUND.get()
    if bound is not None and time.monotonic() > bound.end:
        raise TimeLimit(bound.seconds)


__all__ = ["TimeLimit", "TooLarge", "bounded", "check", "check_size", "limit"]
