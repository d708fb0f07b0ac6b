"""Repairing many files at once: the repairs computed in worker processes, written by the caller (no torch import).

``mend fix`` repairs each file on its own: the repair of one file reads its text, its findings, the options,
the configuration and the project index (what ``mend check`` knows of the other files), and, through a
relative import, the modules beside it. So :func:`repair_all` computes the repairs of many files in a pool of
processes (``-j``, all cores by default), each worker given the options, configuration and project once, and
hands them back in the order given; the caller then locks, re-reads, compares and writes each file itself
(:func:`mend.rewriter.api.fix_paths`), in that order, so that the output is the same byte for byte as with
one process. :func:`repair_file` is the one repair both paths run.
"""

from __future__ import annotations

import contextlib
import gc
import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass, field

from mend import deadline
from mend.analyzers.diagnostic import Diagnostic
from mend.rewriter.options import FixOptions
from mend.rewriter.results import FileResult


@dataclass
class Outcome:
    """What repairing one file's bytes gave: the findings repaired and the result, or None when none was
    left to repair; the notes and the error (``result`` None then) for the run; the sibling modules read."""

    digest: str  # of the bytes repaired
    diags: list[Diagnostic] | None = None
    result: FileResult | None = None
    notes: list[tuple[str, str]] = field(default_factory=list)
    error: str | None = None
    siblings: list[tuple[str, str]] = field(default_factory=list)  # (path, digest) of the modules read beside it


@dataclass
class Job:
    """One file to repair: its text and the digest of its bytes, the path shown, its findings, and the digest
    of the bytes ``mend check`` analysed (None: not analysed)."""

    text: str
    digest: str
    display: str
    diags: list[Diagnostic]
    analysed: str | None


Diagnoser = Callable[[str, str], list[Diagnostic]]  # (text, path shown) -> its findings


def repair_file(job: Job, options: FixOptions, diagnose: Diagnoser) -> Outcome:
    """Repair ``job``'s text (nothing is written): analysed again first when its bytes are not the ones
    analysed; bounded by ``MEND_FILE_TIME_LIMIT`` (:mod:`mend.deadline`); a pathological file is an error."""
    from mend.rewriter import context  # LibCST: imported by the first repair, not by a run that needs none

    out = Outcome(job.digest)
    with context.sibling_reads() as read:
        try:
            with deadline.bounded(deadline.limit()), fewer_collections():
                found = _repair(job, options, diagnose, out)
        except deadline.TimeLimit as exc:
            out.error = f"skipped: repair {exc}; left unchanged"
            return out
        except deadline.TooLarge as exc:
            out.error = f"skipped: {exc}; left unchanged"
            return out
        except (RecursionError, MemoryError) as exc:  # a pathological file must not stop the run
            out.error = f"cannot repair: {type(exc).__name__}; left unchanged"
            return out
        out.siblings = sorted(set(read))
    if found is not None:
        out.diags, out.result = found
    return out


YOUNG_OBJECTS = 100_000


@contextlib.contextmanager
def fewer_collections(young: int = YOUNG_OBJECTS) -> Iterator[None]:
    """Python's cycle collector runs after every 700 new objects (3.11), and scans every object after some of
    those runs: a repair makes LibCST nodes by the million, few of them garbage in cycles, and a 0.5 MB file of
    4,618 findings spent a quarter of its time collecting. Within the block it runs after ``young`` new objects."""
    before = gc.get_threshold()
    gc.set_threshold(young, *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def _repair(job: Job, options: FixOptions, diagnose: Diagnoser,
            out: Outcome) -> tuple[list[Diagnostic], FileResult] | None:
    diags = job.diags
    if job.analysed is not None and job.digest != job.analysed:
        out.notes.append((job.display, "changed on disk since it was analysed: analysed again"))
        diags = [d for d in diagnose(job.text, job.display) if d.source == "static"] + \
            [d for d in diags if d.source != "static"]
        if not diags:
            return None
    diags = [d if d.path == job.display else _with_path(d, job.display) for d in diags]
    return diags, fix_windowed(job.text, job.display, diags, options, lambda text: diagnose(text, job.display))


def fix_windowed(source: str, path: str, diagnostics: Sequence[Diagnostic], options: FixOptions,
                 diagnose: Callable[[str], list[Diagnostic]]) -> FileResult:
    """:func:`mend.rewriter.window.fix_windowed`, imported on first use."""
    from mend.rewriter import window

    return window.fix_windowed(source, path, diagnostics, options, diagnose)


def _with_path(d: Diagnostic, path: str) -> Diagnostic:
    data = d.to_dict()
    data["path"] = path
    return Diagnostic.from_dict(data)


# --- the pool -------------------------------------------------------------------------------------

_STATE: tuple[FixOptions, Diagnoser] | None = None  # in a worker: what every job of the run shares


def _start(options: FixOptions, diagnose: Diagnoser) -> None:
    global _STATE
    _STATE = (options, diagnose)


def _run(job: Job) -> Outcome:
    assert _STATE is not None
    return repair_file(job, *_STATE)


def jobs_for(jobs: int | None, count: int) -> int:
    """The worker processes for ``count`` files: ``jobs`` (None or 0: every core), never more than files."""
    wanted = jobs if jobs else (os.cpu_count() or 1)
    return max(1, min(wanted, count))


def repair_all(todo: Sequence[Job], options: FixOptions, diagnose: Diagnoser, jobs: int | None = None,
               done: Callable[[], None] | None = None) -> Iterator[Outcome]:
    """The outcome of each job, in the order of ``todo``: in ``jobs`` worker processes when there are
    several files and the platform can start workers that share the run's state (fork), else here."""
    workers = jobs_for(jobs, len(todo))
    if workers == 1 or "fork" not in multiprocessing.get_all_start_methods():
        for job in todo:
            yield repair_file(job, options, diagnose)
            if done is not None:
                done()
        return
    from mend.rewriter import registry, window  # noqa: F401  (imported here once: every worker starts with them)

    registry.strategies()
    fork = multiprocessing.get_context("fork")  # the workers inherit the project index instead of a copy of it
    with ProcessPoolExecutor(max_workers=workers, mp_context=fork, initializer=_start,
                             initargs=(options, diagnose)) as pool:
        futures: dict[int, Future] = {}
        for i in sorted(range(len(todo)), key=lambda i: -len(todo[i].text)):  # the longest first: a shorter tail
            futures[i] = pool.submit(_run, todo[i])
        for i in range(len(todo)):
            outcome = futures.pop(i).result()
            if done is not None:
                done()
            yield outcome


__all__ = ["Diagnoser", "Job", "Outcome", "jobs_for", "repair_all", "repair_file"]
