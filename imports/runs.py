"""A recorded run of a program whose imports were repaired: its sites at the original files' lines.

Dynamo sees the repaired code, so a break inside a repaired module is recorded at a line of the repaired
text (the file name is already the original's). :func:`attribute` moves every site, stack frame and
region of a repaired module to the original line it comes from (the entry's line map, see
:func:`mend.rewriter.results.line_map`), with that line's text, merges sites that land on the same line, and
lists the modules that were loaded repaired and what was changed in each (``RunData.repaired``, shown by
``mend report``). Sites in other files are left as they are.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from mend.imports.cache import REPAIRED
from mend.imports.hook import RepairHook


def attribute(data: Any, hook: RepairHook) -> Any:
    """``data`` (a ``RunData``) with sites in repaired modules at original lines, and ``data.repaired``."""
    entries = {e.path: e for e in hook.loaded.values() if e.status == REPAIRED}
    root = data.root or os.getcwd()

    def entry_of(path: str) -> Any:
        return entries.get(os.path.realpath(path if os.path.isabs(path) else os.path.join(root, path)))

    def original(path: str, line: int) -> int:
        entry = entry_of(path)
        return entry.original_line(line) if entry is not None else line

    def text(path: str, line: int, fallback: str) -> str:
        entry = entry_of(path)
        if entry is None:
            return fallback
        return _original_text(entry.path, line) or fallback

    for site in [*data.breaks, *data.recompiles]:
        new_line = original(site.path, site.line)
        site.source_line = text(site.path, new_line, site.source_line)
        site.line = new_line
        if hasattr(site, "stack"):
            site.stack = [[p, original(p, ln), fn] for p, ln, fn in site.stack]
        if getattr(site, "function_path", ""):
            site.function_line = original(site.function_path, site.function_line)
    renamed: dict[str, str] = {}
    for region in data.regions:
        new_line = original(region.path, region.line)
        if new_line != region.line:
            old_id, region.line = region.id, new_line
            region.id = f"{region.path}:{new_line}:{region.function}"
            renamed[old_id] = region.id
    for site in [*data.breaks, *data.recompiles]:
        site.regions = list(dict.fromkeys(renamed.get(r, r) for r in site.regions))
    data.breaks = _merged(data.breaks)
    data.recompiles = _merged(data.recompiles)
    data.repaired = repaired_modules(hook, root)
    return data


def repaired_modules(hook: RepairHook, root: str) -> list[dict[str, Any]]:
    """One record per module the hook loaded repaired (or failed to repair): what changed, at which lines."""
    out = []
    for entry in sorted(hook.loaded.values(), key=lambda e: e.module):
        if entry.status != REPAIRED and not entry.error:
            continue
        out.append({"module": entry.module, "path": _display(entry.path, root), "status": entry.status,
                    "applied": [dataclasses.asdict(a) for a in entry.applied], "remaining": entry.remaining,
                    "error": entry.error})
    return out


def _merged(sites: list[Any]) -> list[Any]:
    """Sites that now share a key become one (counts added, regions and tests joined)."""
    out: dict[Any, Any] = {}
    for site in sites:
        have = out.get(site.key)
        if have is None:
            out[site.key] = site
            continue
        have.count += site.count
        for name in ("regions", "tests"):
            values = getattr(have, name)
            values.extend(v for v in getattr(site, name) if v not in values)
        for flag in ("frame_skip", "limit_hit"):
            if getattr(site, flag, False):
                setattr(have, flag, True)
    return list(out.values())


def _original_text(path: str, line: int) -> str:
    """A line of the original file on disk (linecache holds the repaired text under the same name)."""
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            for i, text in enumerate(fh, 1):
                if i == line:
                    return text.strip()
    except OSError:
        pass
    return ""


def _display(path: str, root: str) -> str:
    rel = os.path.relpath(path, root)
    return path if rel.startswith("..") else rel


__all__ = ["attribute", "repaired_modules"]
