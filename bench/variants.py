"""The two source variants of a benchmark: the original code and its repaired copy.

The repaired variant comes from ``--fixed DIR`` (a folder whose modules shadow the originals on
``sys.path``, or that holds a repaired copy of the harness file itself), or, without it, from running
``mend fix`` on a temporary copy of the harness file's folder.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from mend.analyzers.runtime.harness import HarnessError, HarnessSpec, parse_spec


class RepairUnavailable(Exception):
    """No repaired variant can be made; the message says what to do instead."""


@dataclass
class Variant:
    name: str  # "original" | "repaired"
    harness: str  # path.py:function to load in the worker
    search: list[str] = field(default_factory=list)  # put first on sys.path, in order
    fixed: str | None = None  # the folder that must shadow something (repaired only)
    source: str = ""  # the harness file the worker loads, for the report


def original(spec: HarnessSpec) -> Variant:
    return Variant("original", str(spec), [], None, str(spec.path))


def from_fixed_dir(spec: HarnessSpec, fixed: str | Path) -> Variant:
    """The repaired variant for ``--fixed DIR``.

    When DIR holds a copy of the harness file (at the same path relative to the current directory, or
    under the same file name), that copy is loaded; otherwise the original harness file is loaded with
    DIR first on ``sys.path``. The worker checks that something was really imported from DIR.
    """
    root = Path(fixed).resolve()
    if not root.is_dir():
        raise HarnessError(f"--fixed {fixed}: not a folder")
    candidates = []
    try:
        candidates.append(root / spec.path.relative_to(Path.cwd().resolve()))
    except ValueError:
        pass
    candidates.append(root / spec.path.name)
    harness_file = next((c for c in candidates if c.is_file()), None)
    search = [str(root)]
    if harness_file is not None:
        if harness_file.parent != root:
            search.append(str(harness_file.parent))
        search.append(str(spec.path.parent))  # unrepaired siblings stay importable
        return Variant("repaired", f"{harness_file}:{spec.function}", search, str(root), str(harness_file))
    return Variant("repaired", str(spec), search, str(root), str(spec.path))


def auto_repair(spec: HarnessSpec, workdir: Path, unsafe_fixes: bool = False) -> tuple[Variant, list[str]]:
    """Copy the harness file's folder (its ``.py`` files) to ``workdir`` and run ``mend fix`` on the copy.

    Returns the repaired variant and notes for the report. Raises :class:`RepairUnavailable` when the
    rewriter cannot run, with the way out (``--fixed``) in the message.
    """
    src_dir = spec.path.parent
    dest = workdir / "repaired"
    dest.mkdir(parents=True, exist_ok=True)
    copied = []
    for f in sorted(src_dir.glob("*.py")):
        shutil.copy2(f, dest / f.name)
        copied.append(f.name)
    cmd = [sys.executable, "-m", "mend.cli", "fix", *(["--unsafe-fixes"] if unsafe_fixes else []), str(dest)]
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=env, cwd=str(dest))
    except subprocess.TimeoutExpired as exc:
        raise RepairUnavailable("`mend fix` on a copy of the harness folder took over 10 minutes; pass --fixed DIR") from exc
    out = (proc.stdout + proc.stderr).strip()
    if "No such command" in out:
        raise RepairUnavailable(
            "this mend has no `fix` command, so it cannot repair a copy itself; repair a copy of your "
            "sources and pass it with --fixed DIR"
        )
    if proc.returncode not in (0, 1):
        tail = " ".join(ln.strip(" │╭╮╰╯─") for ln in out.splitlines()[-5:]).strip()
        raise RepairUnavailable(
            "mend could not repair a copy of the harness folder itself (`mend fix` exited "
            f"{proc.returncode}: {tail or 'no output'}). Repair a copy yourself and pass it with --fixed DIR, "
            "e.g.  cp -r SRC /tmp/fixed && mend fix /tmp/fixed && mend bench HARNESS --fixed /tmp/fixed"
        )
    changed = [n for n in copied if not filecmp.cmp(src_dir / n, dest / n, shallow=False)]
    notes = [
        f"repaired variant: `mend fix{' --unsafe-fixes' if unsafe_fixes else ''}` on a temporary copy of {src_dir} (removed after the run); "
        f"it changed {', '.join(changed) or 'nothing'}"
    ]
    if not changed:
        notes.append("mend fix changed no file: the repaired variant runs the same code as the original")
    variant = from_fixed_dir(spec, dest)
    return variant, notes


__all__ = ["RepairUnavailable", "Variant", "auto_repair", "from_fixed_dir", "original", "parse_spec"]
