"""Fixability is one decision: ``mend fix``'s.

A rule with a repair can only say a fix *may* apply: whether ``mend fix`` applies it at a site depends on
the code around it (a value it cannot prove is a tensor, a branch with a ``continue``), and deciding that
takes the rewriter's syntax trees, which ``mend check`` does not build. So ``mend fix`` records what it
decided for each finding of the bytes it read (:class:`mend.analyzers.static.cache.FixDecisions`, keyed by
the mode it ran in and a digest of the bytes), and ``mend check`` marks its findings from that record:

* ``[*]`` (``Fix.decided``): ``mend fix`` applies this fix to these bytes;
* ``[?]`` (a fix, not decided): the rule has a fix, and ``mend fix`` has not yet looked at these bytes
  (``mend fix --diff`` decides, and check shows the outcome afterwards);
* no mark (no ``Fix``): no fix, or ``mend fix`` declines it here (``data["not_fixed"]`` says why).

After ``mend fix`` writes a file, the findings left in it are recorded as declined: check then says 0
fixable. The mode is ``safe`` or ``unsafe`` (``--unsafe-fixes``) and the side-effect policy; a decision
holds for one mend version (the store is per version) and the bytes of the file it was made on.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from mend.analyzers.diagnostic import Applicability, Diagnostic
from mend.analyzers.static.cache import FixDecisions

DEFAULT_POLICY = "default"  # the side-effect policy when neither the command line nor the configuration names one


def digest(data: bytes) -> str:
    """The name of a file's bytes, in ``mend check``'s results and ``mend fix``'s reads (sha256, hex)."""
    return hashlib.sha256(data).hexdigest()


def mode(unsafe: bool, policy: str | None, torch: tuple[int, int] | None = None) -> str:
    """The options a decision depends on: unsafe or not, the side-effect policy, the target torch."""
    return f"{'unsafe' if unsafe else 'safe'}/{policy or DEFAULT_POLICY}/torch {'.'.join(map(str, torch or ())) or '?'}"


def site(d: Diagnostic) -> str:
    return f"{d.code}:{d.line}:{d.col}"


def config_policy(raw: Mapping[str, Any]) -> str | None:
    """The side-effect policy a configuration names (``side-effects = "..."`` in ``[tool.mend]``)."""
    policy = raw.get("side-effects") or raw.get("side_effects")
    return str(policy) if policy else None


def decisions_for(diags: Iterable[Diagnostic], left: Mapping[tuple[str, int], str]) -> dict[str, str | None]:
    """The decision of ``mend fix`` for each finding with a fix: the reason it was left where ``left`` (the
    findings still there after the run, by code and line of the user's file) has it, else ``None``: fixed,
    by its own repair or by another one that removed it."""
    return {site(d): left.get((d.code, d.line)) for d in diags if d.fix is not None and d.source == "static"}


def record(directory: Path | None, decided: dict[str, dict[str, str | None]]) -> None:
    """Store decisions (``{mode:digest: {site: decision}}``) where ``mend check`` of the same folder reads them."""
    if directory is not None and decided:
        FixDecisions(directory).update(decided)


def mark(diags: Sequence[Diagnostic], digests: Mapping[str, str], directory: Path | None,
         policy: str | None, torch: tuple[int, int] | None = None) -> list[Diagnostic]:
    """``diags`` with each fix marked by what ``mend fix`` decided for the bytes of its file (``digests`` by
    diagnostic path): decided (``[*]``, or a hidden fix where only ``--unsafe-fixes`` applies it), removed
    with ``data["not_fixed"]`` (declined), or left undecided."""
    if directory is None:
        return list(diags)
    known = FixDecisions(directory).load()
    out = []
    for d in diags:
        if d.fix is None or d.source != "static" or d.path not in digests:
            out.append(d)
            continue
        safe_rule = d.fix.applicability is Applicability.SAFE
        key = site(d)
        safe = known.get(f"{mode(False, policy, torch)}:{digests[d.path]}", {})
        unsafe = known.get(f"{mode(True, policy, torch)}:{digests[d.path]}", {})
        if key in safe and safe[key] is None:  # a safe run removes it, whatever the rule's own fix is
            out.append(_fix(d, Applicability.SAFE, True))
        elif safe_rule and key not in safe:
            out.append(_fix(d, Applicability.SAFE, False))
        elif key not in unsafe:  # declined by a safe run (or an unsafe rule): --unsafe-fixes may apply it
            out.append(_fix(d, Applicability.UNSAFE, False))
        elif unsafe[key] is None:
            out.append(_fix(d, Applicability.UNSAFE, True))
        else:
            out.append(dataclasses.replace(d, fix=None, data={**d.data, "not_fixed": unsafe[key]}))
    return out


def _fix(d: Diagnostic, applicability: Applicability, decided: bool) -> Diagnostic:
    assert d.fix is not None
    if d.fix.applicability is applicability and d.fix.decided is decided:
        return d
    return dataclasses.replace(d, fix=dataclasses.replace(d.fix, applicability=applicability, decided=decided))


__all__ = ["DEFAULT_POLICY", "config_policy", "decisions_for", "digest", "mark", "mode", "record", "site"]
