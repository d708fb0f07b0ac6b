"""Map recorded breaks and recompiles to mend's rule codes, static findings and fixes (no torch).

A recorded break gets the rule code of a static finding on the same line when the static analyzer
flags one there (so report, fix and check agree); otherwise a code chosen from the registry id, the
Dynamo message and the source line (the shared contract table); ``MND990``/``MND991`` when no rule
predicts it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from mend.analyzers.diagnostic import Applicability, Diagnostic, Fix, Severity
from mend.analyzers.runtime.data import BreakSite, RecompileSite, RunData, resolve
from mend.analyzers.static.rules import fix_info, rule_for

# registry id -> codes that predict it (contract table); the first is the default
BREAK_CODES: dict[str, tuple[str, ...]] = {
    "GB0059": ("MND101", "MND106", "MND109", "MND110", "MND312"),
    "GB0291": ("MND102",),
    "GB0007": ("MND510", "MND103", "MND104", "MND105", "MND106", "MND107"),
    "GB0156": ("MND104", "MND107"),
    "GB4198": ("MND108",),
    "GB0179": ("MND108",),
    "GB0088": ("MND503", "MND109"),
    "GB0142": ("MND507", "MND110"),
    "GB0170": ("MND201", "MND202", "MND203", "MND302"),
    "GB0124": ("MND301", "MND302", "MND311"),
    "GB0109": ("MND303",),
    "GB0033": ("MND303", "MND302", "MND310"),
    "GB0036": ("MND305", "MND304"),
    "GB0123": ("MND501",),
    "GB9186": ("MND501",),
    "GB0264": ("MND502",),
    "GB0098": ("MND504",),
    "GB0066": ("MND508",),
    "GB7000": ("MND506",),
    "GB0025": ("MND509",),
    "GB0119": ("MND511",),
}

RECOMPILE_CODES: dict[str, str] = {
    "int-attribute": "MND401",
    "value": "MND402",
    "backend": "MND403",
    "train-eval": "MND404",
    "dtype": "MND405",
}


def rule_name(code: str) -> str:
    rule = rule_for(code)
    return rule.name if rule is not None else ""


def _has(pattern: str, text: str) -> bool:
    return re.search(pattern, text) is not None


def code_for_break(site: BreakSite, root: str = "") -> str:
    """The rule code a break most likely belongs to, from its registry id, message and line."""
    gb = site.registry_id or ""
    line = site.source_line
    msg = site.message
    if gb == "GB0059":
        if "`breakpoint`" in msg:
            return "MND106"
        if "`open`" in msg:
            return "MND110"
        if re.search(r"`(str|repr|format)`", msg):
            return "MND109"
        return "MND101"
    if gb == "GB0007":
        if "_warnings.warn" in msg or "warn" in msg and _has(r"\bwarnings\.warn\(|\bwarn\(", line):
            return "MND103"
        if re.search(r"`time\.|`datetime", msg) or _has(r"\btime\.\w+\(|perf_counter\(|monotonic\(", line):
            return "MND104"
        if "Random." in msg or _has(r"\brandom\.\w+\(", line):
            return "MND105"
        if "sys.audit" in msg or _has(r"\bpdb\.|set_trace\(|breakpoint\(", line):
            return "MND106"
        if "`save`" in msg or _has(r"torch\.save\(", line):
            return "MND107"
        return "MND510"
    if gb == "GB0156":
        if _has(r"torch\.save\(|BytesIO\(", line):
            return "MND107"
        if "now" in msg or _has(r"datetime|time\.", line):
            return "MND104"
        return "MND990"
    if gb == "GB0088":
        if _has(r"f[\"'].*\{|\bstr\(|\brepr\(|\bhash\(", line):
            return "MND109"
        return "MND503"
    if gb == "GB0142":
        return "MND110" if _has(r"\bopen\(", line) else "MND507"
    if gb == "GB0170":
        stripped = line.lstrip()
        if stripped.startswith("while"):
            return "MND202"
        if _has(r"\btorch\.equal\(", line) or _next_is_raise(site, root):
            return "MND203"
        return "MND201"
    if gb == "GB0124":
        if ".item()" in line:
            return "MND301"
        if not _has(r"\b(float|int|bool)\(|\bmath\.", line) and _has(r"\[[^\]]*:", line):
            return "MND311"  # `x[:n]`: the slice bound calls `.item()`
        return "MND302"
    if gb == "GB0033":
        return "MND303" if "tolist" in line else "MND302"
    if gb == "GB0036":
        if _has(r"\b(nonzero|unique|unique_consecutive|masked_select|argwhere)\(|torch\.where\([^,]*\)$", line):
            return "MND304"
        return "MND305"
    codes = BREAK_CODES.get(gb)
    return codes[0] if codes else "MND990"


def _next_is_raise(site: BreakSite, root: str) -> bool:
    import linecache
    from pathlib import Path

    path = Path(site.path)
    if not path.is_absolute():
        path = Path(root or ".") / path
    for offset in (1, 2):
        text = linecache.getline(str(path), site.line + offset).strip()
        if text:
            return text.startswith("raise ")
    return False


def code_for_recompile(site: RecompileSite) -> str:
    return RECOMPILE_CODES.get(site.kind, "MND991")


# --------------------------------------------------------------------------------------------------
# static findings and fixes (optional parts: they may not be installed or ready)
# --------------------------------------------------------------------------------------------------
def static_codes(paths: Iterable[str], extra: Iterable[str] = ()) -> dict[tuple[str, int], list[Diagnostic]]:
    """Static findings per (absolute path, line) for the given files; empty if unavailable. Their fixes
    carry what ``mend fix`` decided for the files' bytes (``mend check``'s marks).

    ``extra`` files (the run's scripts) are analysed with them, so that the analyzer sees the
    ``torch.compile`` call sites that make the other files' functions compiled.
    """
    import os
    from pathlib import Path

    out: dict[tuple[str, int], list[str]] = {}
    files = sorted({str(Path(p)) for p in [*paths, *extra] if Path(p).is_file()})
    if not files:
        return out
    try:
        from mend.analyzers.static import check_paths, load_config  # type: ignore[attr-defined]

        config = load_config(files)
        diagnostics = list(check_paths(files, config).diagnostics)
    except Exception:
        return out
    for d in diagnostics:
        path = os.path.realpath(d.path if os.path.isabs(d.path) else Path.cwd() / d.path)
        for line in range(d.line, (d.end_line or d.line) + 1):
            out.setdefault((path, line), []).append(d)
    return out


@dataclass
class FixStatus:
    available: str | None  # "always" | "sometimes" | None
    applicability: str | None  # "safe" | "unsafe" | None
    summary: str = ""

    @property
    def label(self) -> str:
        if not self.available:
            return "no"
        return f"{self.applicability or 'yes'}" + (" (sometimes)" if self.available == "sometimes" else "")


def fix_status(code: str) -> FixStatus:
    info = fix_info(code)
    if info is None:
        return FixStatus(None, None)
    return FixStatus(info.availability, info.applicability, info.summary)


def decided_status(d: Diagnostic) -> FixStatus:
    """The fix status of a static finding as ``mend check`` marks it: ``always`` where ``mend fix`` decided to
    fix it (in its own mode: ``unsafe`` when only ``--unsafe-fixes`` does), ``sometimes`` where it has not
    decided yet, none where it declines."""
    if d.fix is None:
        return FixStatus(None, None, str(d.data.get("not_fixed", "")))
    return FixStatus("always" if d.fix.decided else "sometimes", d.fix.applicability.value, d.fix.message)


@dataclass
class Finding:
    """A recorded site with its rule, its static match and its fix status (for reports and gates)."""

    kind: str  # "break" | "frame-skip" | "recompile"
    code: str
    name: str
    site: Any  # BreakSite | RecompileSite
    static_match: bool
    fix: FixStatus

    @property
    def path(self) -> str:
        return self.site.path

    @property
    def line(self) -> int:
        return self.site.line

    @property
    def count(self) -> int:
        return self.site.count

    @property
    def registry_id(self) -> str | None:
        return getattr(self.site, "registry_id", None)

    @property
    def reason(self) -> str:
        if isinstance(self.site, BreakSite):
            return f"{self.site.gb_type}: {self.site.message}" if self.site.message else self.site.gb_type
        return self.site.reason or self.site.guard

    def to_diagnostic(self) -> Diagnostic:
        site = self.site
        if isinstance(site, BreakSite):
            what = "whole frame skipped" if site.frame_skip else "graph break"
            message = f"{what} ({site.registry_id or 'no registry id'}, {site.count}x): {site.gb_type}: {site.message}"
            registry = tuple(x for x in (site.registry_id, site.outer_registry_id) if x)
            severity = Severity.ERROR
            data: dict[str, Any] = {
                "kind": self.kind,
                "count": site.count,
                "gb_type": site.gb_type,
                "function": site.function,
                "frame_skip": site.frame_skip,
                "hints": site.hints,
                "regions": site.regions,
                "static_match": self.static_match,
            }
        else:
            message = (
                f"recompile ({site.kind}, {site.count}x{', limit hit' if site.limit_hit else ''}) of "
                f"{site.function}: {site.guard or site.reason}"
            )
            registry = ()
            severity = Severity.WARNING
            data = {
                "kind": self.kind,
                "count": site.count,
                "trigger": site.kind,
                "function": site.function,
                "guard": site.guard,
                "reason": site.reason,
                "limit_hit": site.limit_hit,
                "regions": site.regions,
                "static_match": self.static_match,
            }
        fix = None
        if self.fix.available:
            applicability = Applicability.UNSAFE if self.fix.applicability == "unsafe" else Applicability.SAFE
            fix = Fix(self.fix.summary or f"`mend fix` can repair {self.code}", applicability)
        return Diagnostic(
            code=self.code,
            name=self.name,
            message=message,
            path=site.path,
            line=max(1, site.line),
            col=1,
            severity=severity,
            fix=fix,
            registry_ids=registry,
            source="runtime",
            data=data,
        )


def findings(data: RunData, use_static: bool = True, include_library: bool = True) -> list[Finding]:
    """Every recorded site as a :class:`Finding`, sorted by path and line."""
    import os

    static: dict[tuple[str, int], list[str]] = {}
    if use_static:
        files = {str(resolve(data, s.path)) for s in [*data.breaks, *data.recompiles] if not s.in_library}
        scripts = [str(resolve(data, r.argv[0])) for r in data.runs if r.argv and r.argv[0].endswith(".py")]
        static = static_codes(files, scripts)

    def key(site: Any) -> tuple[str, int]:
        return (os.path.realpath(resolve(data, site.path)), site.line)

    out: list[Finding] = []
    fixes: dict[str, FixStatus] = {}
    for site in data.breaks:
        if site.in_library and not include_library:
            continue
        guess = code_for_break(site, data.root)
        flagged = static.get(key(site), [])
        code, matched = _choose(guess, [d.code for d in flagged], BREAK_CODES.get(site.registry_id or "", ()))
        fix = _status(code, matched, flagged, fixes)
        out.append(Finding("frame-skip" if site.frame_skip else "break", code, rule_name(code), site, matched, fix))
    for site in data.recompiles:
        if site.in_library and not include_library:
            continue
        guess = code_for_recompile(site)
        flagged = static.get(key(site), [])
        code, matched = _choose(guess, [d.code for d in flagged], (guess,) if guess != "MND991" else ())
        fix = _status(code, matched, flagged, fixes)
        out.append(Finding("recompile", code, rule_name(code), site, matched, fix))
    out.sort(key=lambda f: (f.path, f.line, f.kind, f.code))
    return out


def _status(code: str, matched: bool, flagged: list[Diagnostic], rules: dict[str, FixStatus]) -> FixStatus:
    """The site's static finding decides (as ``mend check`` marks it); a site check does not flag gets the
    rule's."""
    found = next((d for d in flagged if d.code == code), None) if matched else None
    return decided_status(found) if found is not None else rules.setdefault(code, fix_status(code))


def _choose(guess: str, flagged: list[str], predicting: tuple[str, ...]) -> tuple[str, bool]:
    """Prefer the static code on that line: the guessed one, then one that predicts this id, then any."""
    if not flagged:
        return guess, False
    if guess in flagged:
        return guess, True
    for code in flagged:
        if code in predicting:
            return code, True
    if guess in ("MND990", "MND991"):
        return flagged[0], True
    return guess, False
