"""Which files ``mend check`` looks at: ``*.py`` under the given paths, minus exclusions and ignores.

Directories named in ``exclude``/``extend-exclude`` (glob patterns matched against each path
component and against the path relative to the project root) are pruned while walking, and so are
paths ignored by ``.gitignore`` files (a small matcher: negation, directory-only patterns, anchored
patterns and ``**``). Files named explicitly on the command line are always checked, unless
``--force-exclude`` is given (what pre-commit hooks need, since they pass every staged file).
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator
from pathlib import Path

from mend.analyzers.static.config import Config


def _glob_to_regex(pattern: str) -> re.Pattern[str]:
    i, out = 0, []
    while i < len(pattern):
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("/**", i) and i + 3 == len(pattern):
            out.append("/.*")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 1)
            if j == -1:
                out.append(re.escape(c))
            else:
                out.append("[" + pattern[i + 1:j].replace("\\", "\\\\") + "]")
                i = j
        else:
            out.append(re.escape(c))
        i += 1
    return re.compile("".join(out) + r"\Z")


class GitIgnore:
    """The ``.gitignore`` rules that apply below a repository root."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._rules: dict[Path, list[tuple[re.Pattern[str], bool, bool, bool]]] = {}

    def _load(self, folder: Path) -> list[tuple[re.Pattern[str], bool, bool, bool]]:
        rules = self._rules.get(folder)
        if rules is not None:
            return rules
        rules = []
        try:
            text = (folder / ".gitignore").read_text(encoding="utf-8", errors="replace")
        except OSError:
            text = ""
        for raw in text.splitlines():
            line = raw.rstrip()
            if not line or line.startswith("#"):
                continue
            neg = line.startswith("!")
            if neg:
                line = line[1:]
            dir_only = line.endswith("/")
            line = line.rstrip("/")
            anchored = "/" in line
            line = line.lstrip("/")
            rules.append((_glob_to_regex(line), neg, dir_only, anchored))
        self._rules[folder] = rules
        return rules

    def ignored(self, path: Path, is_dir: bool) -> bool:
        path = path.resolve()
        try:
            rel = path.relative_to(self.root)
        except ValueError:
            return False
        result = False
        folder = self.root
        parts = rel.parts
        for depth in range(len(parts)):
            sub = "/".join(parts[depth:])
            for regex, neg, dir_only, anchored in self._load(folder):
                if dir_only and not is_dir:
                    continue
                target = sub if anchored else parts[-1]
                if regex.match(target):
                    result = not neg
            folder = folder / parts[depth]
        return result


class Excluder:
    def __init__(self, config: Config) -> None:
        self.patterns = tuple(config.exclude) + tuple(config.extend_exclude)
        self.root = config.root.resolve() if config.root else None
        self._nested = tuple(pat for pat in self.patterns if "/" in pat)  # matched against the path from the root
        # every pattern against a name, as one expression (fnmatch's own translation; names are case-sensitive here)
        self._names = re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in self.patterns)) if self.patterns \
            else None

    def excluded(self, path: Path) -> bool:
        if self._names is not None and self._names.match(path.name):
            return True
        if self.root is not None and self._nested:
            try:
                rel = path.resolve().relative_to(self.root).as_posix()
            except ValueError:
                return False
            return any(fnmatch.fnmatch(rel, pat) for pat in self._nested)
        return False


def discover_files(paths: list[str | Path] | tuple, config: Config, force_exclude: bool = False) -> list[Path]:
    """Python files under ``paths`` (sorted, unique), honouring exclusions and ``.gitignore``."""
    excluder = Excluder(config)
    ignores: dict[Path, GitIgnore | None] = {}
    roots: dict[Path, Path | None] = {}  # a (resolved) folder's repository root, found once per folder

    def root_of(folder: Path) -> Path | None:
        if folder not in roots:
            parent = folder.parent
            roots[folder] = folder if (folder / ".git").exists() else None if parent == folder else root_of(parent)
        return roots[folder]

    def gitignored(p: Path, is_dir: bool) -> bool:
        if not config.respect_gitignore:
            return False
        root = root_of((p if is_dir else p.parent).resolve())
        if root is None:
            return False
        gi = ignores.get(root)
        if gi is None:
            gi = ignores[root] = GitIgnore(root)
        return gi.ignored(p, is_dir)

    out: dict[Path, None] = {}
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            if force_exclude and _any_parent_excluded(p, excluder):
                continue
            out.update(dict.fromkeys(_walk_folder(p, excluder, gitignored)))
        elif p.exists() or p.is_symlink():
            if force_exclude and (_any_parent_excluded(p, excluder) or gitignored(p, False)):
                continue
            out[p] = None
        else:
            raise FileNotFoundError(f"{raw}: no such file or directory")
    return list(out)


def _walk_folder(folder: Path, excluder: Excluder, gitignored) -> Iterator[Path]:
    """The ``.py`` files under ``folder``, in sorted order, skipping excluded and ignored paths."""
    for dirpath, dirnames, filenames in os.walk(folder):
        d = Path(dirpath)
        dirnames[:] = [dn for dn in sorted(dirnames) if not (excluder.excluded(d / dn) or gitignored(d / dn, True))]
        for fn in sorted(filenames):
            f = d / fn
            if fn.endswith(".py") and not (excluder.excluded(f) or gitignored(f, False)):
                yield f


def _any_parent_excluded(p: Path, excluder: Excluder) -> bool:
    cur = p
    for _ in range(64):
        if excluder.excluded(cur):
            return True
        if cur.parent == cur or str(cur.parent) in ("", "."):
            break
        cur = cur.parent
    return False
