"""The result cache of ``mend fix``: a file whose inputs are unchanged is not repaired again (no torch import).

A repair (:func:`mend.rewriter.workers.repair_file`) is a function of the file's bytes, its findings, the
options, the path it is shown under and where its helpers come from, mend's own code, and the modules beside
it that a repair reads through a relative import. What the other files of the project tell about this one
(which functions are compiled, what a call returns) reaches the repair through its findings, which
``mend check`` computes from the project index. So the key of a cached repair is a hash of all of these but
the modules beside it, which are recorded with the digest of their bytes and compared on every hit.

The cache lives beside ``mend check``'s (``.mend_cache/fix/``), in the same tagged JSON
(:func:`mend.analyzers.static.cache.save_data`): data, never code. Each entry is kept as its own encoded
text and decoded only when its key is asked for: a warm run reads the whole file but decodes only the entries
of the files it meets (a repaired text of the first run is never decoded on the tree it was written to). A repaired file's new text is stored as
its own entry, and so is the file as written: a written file whose last round of repairs found nothing more
to do is known to stay as it is (fixing twice gives what fixing once gives), so the next run on the repaired
tree repairs nothing again.
"""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from mend.analyzers.diagnostic import Diagnostic
from mend.analyzers.static.cache import analyzer_fingerprint, load_data, save_data
from mend.analyzers.static.datacodec import DataError, dumps, loads
from mend.rewriter.options import FixOptions
from mend.rewriter.results import AppliedFix, FileResult, Remaining
from mend.rewriter.workers import Job, Outcome
from mend.version import __version__

MAX_ENTRIES = 8192


@lru_cache(maxsize=1)
def rewriter_fingerprint() -> str:
    """A hash of mend's version and the rewriter's and the analyzer's sources."""
    h = hashlib.blake2b(analyzer_fingerprint().encode(), digest_size=16)
    for f in sorted(Path(__file__).resolve().parent.rglob("*.py")):
        try:
            h.update(f.read_bytes())
        except OSError:
            pass
    return h.hexdigest()


def job_key(job: Job, options: FixOptions, where: str, cwd: str) -> str:
    """The key of repairing ``job`` with ``options``; ``where``: where its helpers come from."""
    h = hashlib.blake2b(digest_size=20)
    for part in (rewriter_fingerprint(), job.digest, job.analysed or "", job.display, repr(options), where, cwd):
        h.update(part.encode() + b"\0")
    for line in sorted(repr(sorted((k, v) for k, v in d.to_dict().items() if k != "path")) for d in job.diags):
        h.update(line.encode() + b"\n")  # the path is the one shown (above); the order is the engine's own
    return h.hexdigest()


class FixCache:
    """Cached repairs by key, most recent last (``directory``: the cache folder; None: no cache)."""

    def __init__(self, directory: Path | None) -> None:
        self.directory = directory
        self.file = directory / "fix" / f"v{__version__}.json" if directory is not None else None
        self.entries: dict[str, str] = {}
        self.dirty = False
        self.hits = 0
        if self.file is not None:
            data = load_data(self.file)
            self.entries = data if isinstance(data, dict) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in data.items()) else {}

    def get(self, key: str, job: Job) -> Outcome | None:
        """The outcome stored under ``key``, if the modules beside the file it read are unchanged."""
        entry = self.entries.get(key)
        if entry is None:
            return None
        try:
            outcome = _decode(loads(entry), job)
        except (DataError, KeyError, TypeError, ValueError):
            return None  # not what mend writes: repaired again
        if not all(_digest(path) == digest for path, digest in outcome.siblings):
            return None
        self.hits += 1
        return outcome

    def put(self, key: str, outcome: Outcome) -> None:
        if self.file is None or outcome.error is not None:
            return  # a time limit may be higher next time
        self.entries.pop(key, None)
        self.entries[key] = dumps(_encode(outcome))
        self.dirty = True

    def settled(self, key: str, outcome: Outcome) -> None:
        """Store that repairing the written text ``outcome.result.fixed`` changes nothing more."""
        res = outcome.result
        assert res is not None
        left = Outcome(outcome.digest, outcome.diags, FileResult(res.path, res.fixed, res.fixed,
                                                                 remaining=list(res.remaining)),
                       siblings=outcome.siblings)
        self.put(key, left)

    def save(self) -> None:
        if self.file is None or self.directory is None or not self.dirty:
            return
        while len(self.entries) > MAX_ENTRIES:
            self.entries.pop(next(iter(self.entries)))
        save_data(self.directory, self.file, self.entries)


def _digest(path: str) -> str:
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def _encode(outcome: Outcome) -> dict:
    res = outcome.result
    data: dict = {"diags": outcome.diags, "notes": [list(n) for n in outcome.notes],
                  "siblings": [list(s) for s in outcome.siblings], "result": None}
    if res is not None:
        data["result"] = {
            "fixed": res.fixed if res.changed else None, "error": res.error, "helpers": list(res.helpers),
            "applied": [[a.code, a.line, a.col, a.message, a.applicability, a.strategy, a.end_line, a.keeps_break]
                        for a in res.applied],
            "remaining": [[r.diagnostic, r.reason, r.unsafe_available] for r in res.remaining]}
    return data


def _decode(data: dict, job: Job) -> Outcome:
    diags = data["diags"]
    if diags is not None and not all(isinstance(d, Diagnostic) for d in diags):
        raise TypeError("not a finding")
    out = Outcome(job.digest, diags, notes=[(str(p), str(m)) for p, m in data["notes"]],
                  siblings=[(str(p), str(d)) for p, d in data["siblings"]])
    res = data["result"]
    if res is None:
        return out
    fixed = res["fixed"] if res["fixed"] is not None else job.text
    if not isinstance(fixed, str) or not all(isinstance(r[0], Diagnostic) for r in res["remaining"]):
        raise TypeError("not a repair")
    out.result = FileResult(job.display, job.text, fixed, error=res["error"], helpers=list(res["helpers"]),
                            applied=[AppliedFix(*a) for a in res["applied"]],
                            remaining=[Remaining(d, str(why), bool(u)) for d, why, u in res["remaining"]])
    return out


__all__ = ["FixCache", "job_key", "rewriter_fingerprint"]
