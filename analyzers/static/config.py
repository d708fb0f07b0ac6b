"""``[tool.mend]`` configuration, found by walking up from the checked paths (ruff's contract).

Keys (kebab-case, all optional)::

    [tool.mend]
    select = ["MND1", "MND201"]      # codes or prefixes; "ALL" (default) selects every rule
    extend-select = []
    ignore = ["MND404"]
    per-file-ignores = { "tests/*" = ["MND101"] }
    exclude = [".venv", "build"]     # replaces the default exclusions
    extend-exclude = ["third_party"]
    respect-gitignore = true
    regions = "modules"              # or "compiled-only"
    entry-points = ["pkg.model:Model.forward"]
    cache-dir = ".mend_cache"

Other commands read their own keys from :attr:`Config.raw` (``side-effects`` and ``target-torch`` for the
rewriter, ``gate`` for the runtime gate).
"""

from __future__ import annotations

import fnmatch
import re
import sys
from dataclasses import dataclass, field, replace
from importlib import metadata
from pathlib import Path
from typing import Any

from mend.analyzers.paths import escaping

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib  # type: ignore[no-redef]

DEFAULT_EXCLUDE = (
    ".bzr", ".direnv", ".eggs", ".git", ".git-rewrite", ".hg", ".ipynb_checkpoints", ".mypy_cache", ".nox",
    ".pants.d", ".pytest_cache", ".pytype", ".ruff_cache", ".mend_cache", ".svn", ".tox", ".venv", ".vscode",
    "__pypackages__", "_build", "buck-out", "build", "dist", "node_modules", "site-packages", "venv",
)
REGIONS = ("modules", "compiled-only")


class ConfigError(Exception):
    """Invalid configuration or selector; the CLI exits with code 2."""


@dataclass(frozen=True)
class Config:
    select: tuple[str, ...] = ("ALL",)
    ignore: tuple[str, ...] = ()
    extend_select: tuple[str, ...] = ()
    per_file_ignores: dict[str, tuple[str, ...]] = field(default_factory=dict)
    exclude: tuple[str, ...] = DEFAULT_EXCLUDE
    extend_exclude: tuple[str, ...] = ()
    respect_gitignore: bool = True
    regions: str = "modules"
    entry_points: tuple[str, ...] = ()
    cache_dir: Path | None = None
    root: Path | None = None
    path: Path | None = None  # the pyproject.toml the settings came from
    raw: dict[str, Any] = field(default_factory=dict)

    def with_overrides(self, **changes: Any) -> Config:
        """A copy with command-line overrides (``None`` values are ignored); selectors are validated."""
        changes = {k: v for k, v in changes.items() if v is not None}
        cfg = replace(self, **changes)
        for sel in (*cfg.select, *cfg.extend_select, *cfg.ignore):
            validate_selector(sel)
        if cfg.regions not in REGIONS:
            raise ConfigError(f"regions must be one of {', '.join(REGIONS)}, not {cfg.regions!r}")
        return cfg

    # -- rule selection (ruff semantics: the most specific selector wins, ignore wins ties) --------
    def enabled(self, code: str, path: str | Path | None = None) -> bool:
        sel = _best(code, (*self.select, *self.extend_select))
        if sel < 0:
            return False
        ign = _best(code, self.ignore)
        if path is not None and self.per_file_ignores:
            ign = max(ign, _best(code, self.ignored_for(path)))
        return ign < 0 or sel > ign

    def ignored_for(self, path: str | Path) -> tuple[str, ...]:
        p = Path(path)
        try:
            rel = p.resolve().relative_to(self.root.resolve()).as_posix() if self.root else p.as_posix()
        except ValueError:
            rel = p.as_posix()
        out: list[str] = []
        for pattern, codes in self.per_file_ignores.items():
            neg = pattern.startswith("!")
            pat = pattern[1:] if neg else pattern
            hit = fnmatch.fnmatch(rel, pat) or fnmatch.fnmatch(p.name, pat) or fnmatch.fnmatch(p.as_posix(), pat)
            if hit != neg:
                out.extend(codes)
        return tuple(out)

    def fingerprint(self) -> str:
        """What in the configuration can change analysis results (selection is applied after the cache)."""
        return f"{self.regions}|{','.join(self.entry_points)}"


def _best(code: str, selectors: tuple[str, ...]) -> int:
    best = -1
    for s in selectors:
        if s == "ALL":
            best = max(best, 0)
        elif code.startswith(s):
            best = max(best, len(s))
    return best


def validate_selector(sel: str) -> None:
    from mend.analyzers.static.rules import RULES

    if sel == "ALL":
        return
    if not any(code.startswith(sel) for code in RULES):
        raise ConfigError(f"unknown rule selector {sel!r} (use a code such as MND101, a prefix such as MND1, or ALL)")


def find_pyproject(start: Path) -> Path | None:
    """The nearest ``pyproject.toml`` with a ``[tool.mend]`` table, walking up from ``start``."""
    start = start.resolve()
    d = start if start.is_dir() else start.parent
    for folder in (d, *d.parents):
        cand = folder / "pyproject.toml"
        if cand.is_file():
            try:
                data = tomllib.loads(cand.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
                continue
            if "mend" in data.get("tool", {}):
                return cand
    return None


def _strs(raw: dict[str, Any], key: str, where: Path) -> tuple[str, ...] | None:
    if key not in raw:
        return None
    v = raw[key]
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ConfigError(f"{where}: [tool.mend] {key} must be a list of strings")
    return tuple(v)


def load_config(paths: list[str | Path] | tuple = (), config_file: str | Path | None = None,
                isolated: bool = False) -> Config:
    """Find and read ``[tool.mend]``. ``isolated`` ignores every configuration file."""
    if isolated:
        return Config(root=Path.cwd())
    if config_file is not None:
        pyproject: Path | None = Path(config_file)
        if not pyproject.is_file():
            raise ConfigError(f"configuration file not found: {config_file}")
    else:
        starts = [Path(p) for p in paths if str(p) != "-"] or [Path.cwd()]
        pyproject = find_pyproject(starts[0])
    if pyproject is None:
        return Config(root=None)
    raw = _mend_table(pyproject)
    cfg = Config(**_settings(raw, pyproject))
    try:
        return cfg.with_overrides()
    except ConfigError as exc:
        raise ConfigError(f"{pyproject}: {exc}") from None


def _mend_table(pyproject: Path) -> dict:
    """The ``[tool.mend]`` table of ``pyproject`` (empty when there is none)."""
    try:
        data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read {pyproject}: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{pyproject} is not valid TOML: {exc}") from None
    raw = data.get("tool", {}).get("mend", {})
    if not isinstance(raw, dict):
        raise ConfigError(f"{pyproject}: [tool.mend] must be a table")
    return raw


def _settings(raw: dict, pyproject: Path) -> dict[str, Any]:
    """Keyword arguments of :class:`Config` from a ``[tool.mend]`` table, each value checked."""
    kw: dict[str, Any] = {"root": pyproject.parent.resolve(), "path": pyproject.resolve(), "raw": dict(raw)}
    for key, attr in (("select", "select"), ("ignore", "ignore"), ("extend-select", "extend_select"),
                      ("exclude", "exclude"), ("extend-exclude", "extend_exclude"), ("entry-points", "entry_points")):
        v = _strs(raw, key, pyproject)
        if v is not None:
            kw[attr] = v
    if "per-file-ignores" in raw:
        pfi = raw["per-file-ignores"]
        if not isinstance(pfi, dict) or not all(
                isinstance(v, list) and all(isinstance(c, str) for c in v) for v in pfi.values()):
            raise ConfigError(f"{pyproject}: [tool.mend] per-file-ignores must map globs to lists of codes")
        kw["per_file_ignores"] = {k: tuple(v) for k, v in pfi.items()}
    if "respect-gitignore" in raw:
        if not isinstance(raw["respect-gitignore"], bool):
            raise ConfigError(f"{pyproject}: [tool.mend] respect-gitignore must be true or false")
        kw["respect_gitignore"] = raw["respect-gitignore"]
    if "regions" in raw:
        kw["regions"] = raw["regions"]
    if "cache-dir" in raw:
        if not isinstance(raw["cache-dir"], str):
            raise ConfigError(f"{pyproject}: [tool.mend] cache-dir must be a string")
        kw["cache_dir"] = (pyproject.parent / raw["cache-dir"]).resolve()
        if escaping([kw["cache_dir"]], pyproject.parent):
            raise ConfigError(f"{pyproject}: [tool.mend] cache-dir {raw['cache-dir']!r} resolves to "
                              f"{kw['cache_dir']}, outside {pyproject.parent.resolve()}; a configuration file "
                              "does not send writes elsewhere (name such a folder with --cache-dir)")
    return kw


def target_torch(raw: dict | None = None) -> tuple[int, int] | None:
    """The torch the repaired code runs on: ``target-torch`` of the configuration (``"2.11"``), else the
    installed torch's version from its package metadata (torch is never imported); None when neither is known
    or readable."""
    value = (raw or {}).get("target-torch") or (raw or {}).get("target_torch")
    if not value:
        try:
            value = metadata.version("torch")
        except metadata.PackageNotFoundError:
            return None
    m = re.match(r"\s*(\d+)\.(\d+)", str(value))
    return (int(m.group(1)), int(m.group(2))) if m else None
