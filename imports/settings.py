"""What the import hook repairs and how: :class:`RepairSettings`, and its form in the environment.

The settings travel to child processes (DataLoader workers, ``torchrun`` ranks, ``multiprocessing``
spawns) in one environment variable, ``MEND_REPAIR``: either a comma-separated list of packages
(``MEND_REPAIR=transformers,timm``, safe fixes, the project's ``[tool.mend]`` config) or the JSON that
:meth:`RepairSettings.to_env` writes. A child runs it at start-up through the ``sitecustomize`` in
:data:`STARTUP_DIR`, which ``mend run --repair`` and :func:`mend.repair_imports` put first on
``PYTHONPATH`` (see ``mend.imports.startup``). Standard library only: this runs in every process.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from mend.settings import REPAIR, REPAIR_CACHE

ENV_VAR = REPAIR.name
CACHE_ENV_VAR = REPAIR_CACHE.name
STARTUP_DIR = str(Path(__file__).resolve().parent / "startup")


class SettingsError(ValueError):
    """Settings that cannot be used (an empty package list, a malformed ``MEND_REPAIR``)."""


@dataclass(frozen=True)
class RepairSettings:
    """The packages to repair at import and the ``mend fix`` options to repair them with.

    ``config_file``/``isolated`` choose the ``[tool.mend]`` config as ``mend fix`` does (by default the
    one found from ``root``, the folder the program started in); ``from_run`` adds the sites a recorded
    run found inside the packages (``mend fix --from-run``)."""

    packages: tuple[str, ...]
    unsafe: bool = False
    side_effects: str | None = None
    from_run: str | None = None
    config_file: str | None = None
    isolated: bool = False
    root: str = field(default_factory=os.getcwd)
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        packages = tuple(p.strip() for p in self.packages if p and p.strip())
        if not packages:
            raise SettingsError("no package to repair")
        bad = [p for p in packages if not all(part.isidentifier() for part in p.split("."))]
        if bad:
            raise SettingsError(f"not a package name: {', '.join(bad)}")
        object.__setattr__(self, "packages", packages)
        for name in ("from_run", "config_file", "cache_dir"):
            value = getattr(self, name)
            if value:
                object.__setattr__(self, name, os.path.abspath(value))

    def covers(self, fullname: str) -> bool:
        """Is module ``fullname`` inside one of the packages? (Asked for every import of the program.)"""
        return fullname in self.packages or fullname.startswith(self._dotted)

    @functools.cached_property
    def _dotted(self) -> tuple[str, ...]:
        return tuple(p + "." for p in self.packages)

    def fix_fingerprint(self) -> str:
        """What in these settings decides a repaired text (not the package list or the cache folder)."""
        fix = {"unsafe": self.unsafe, "side_effects": self.side_effects, "config_file": self.config_file,
               "isolated": self.isolated, "root": None if self.isolated or self.config_file else self.root}
        return hashlib.sha256(json.dumps(fix, sort_keys=True).encode()).hexdigest()

    def to_env(self) -> str:
        return json.dumps({k: list(v) if isinstance(v, tuple) else v for k, v in asdict(self).items()},
                          sort_keys=True)

    @classmethod
    def from_env(cls, value: str) -> RepairSettings:
        value = value.strip()
        if not value.startswith("{"):
            return cls(packages=tuple(value.split(",")))
        try:
            raw = json.loads(value)
            return cls(**{**raw, "packages": tuple(raw["packages"])})
        except (ValueError, TypeError, KeyError) as exc:
            raise SettingsError(f"{ENV_VAR} is not valid: {exc}") from None


def export(settings: RepairSettings, environ: dict[str, str] | os._Environ | None = None) -> None:
    """Put ``settings`` in ``environ`` (``os.environ`` by default) so that child processes repair too:
    ``MEND_REPAIR`` and the start-up folder first on ``PYTHONPATH`` (once)."""
    env = os.environ if environ is None else environ
    env[ENV_VAR] = settings.to_env()
    parts = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and p != STARTUP_DIR]
    env["PYTHONPATH"] = os.pathsep.join([STARTUP_DIR, *parts])


def default_cache_dir() -> Path:
    env = REPAIR_CACHE.get()
    if env is not None:
        return env
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "mend" / "repair"


__all__ = ["CACHE_ENV_VAR", "ENV_VAR", "STARTUP_DIR", "RepairSettings", "SettingsError", "default_cache_dir",
           "export"]
