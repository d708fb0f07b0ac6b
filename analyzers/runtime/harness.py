"""Load a user harness: ``path.py:function`` returning ``(model_or_fn, args, kwargs)``.

Shared by ``mend fix --verify`` and ``mend bench``. The harness is user code; loading it imports
torch (through the user's module), so this module itself imports nothing heavy.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import uuid
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mend.analyzers.paths import is_under


class HarnessError(Exception):
    """A harness that cannot be loaded or returns the wrong thing; the message says which."""


@dataclass(frozen=True)
class HarnessSpec:
    path: Path
    function: str

    def __str__(self) -> str:
        return f"{self.path}:{self.function}"


@dataclass
class Harness:
    spec: HarnessSpec
    target: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def parse_spec(text: str) -> HarnessSpec:
    """Parse ``path.py:function``. Raises :class:`HarnessError` with a usable message."""
    path_text, sep, function = text.rpartition(":")
    if not sep or not path_text or not function:
        raise HarnessError(
            f"harness {text!r} must be PATH.py:FUNCTION, e.g. examples/transformer_block.py:harness"
        )
    if not function.isidentifier():
        raise HarnessError(f"harness function name {function!r} is not a Python identifier")
    path = Path(path_text)
    if path.suffix != ".py":
        raise HarnessError(f"harness file {path_text!r} is not a .py file")
    if not path.is_file():
        raise HarnessError(f"harness file {path_text!r} does not exist")
    return HarnessSpec(path=path.resolve(), function=function)


def load(spec: HarnessSpec | str, search_path: Sequence[str | Path] = ()) -> Harness:
    """Import the harness file and call its function.

    ``search_path`` entries are put first on ``sys.path`` (e.g. the directory of a repaired copy, so
    that its modules shadow the originals); the harness file's own directory comes after them.
    """
    if isinstance(spec, str):
        spec = parse_spec(spec)
    for entry in reversed([str(Path(p).resolve()) for p in search_path]):
        if entry not in sys.path:
            sys.path.insert(0, entry)
    parent = str(spec.path.parent)
    if parent not in sys.path:
        sys.path.insert(len(search_path), parent)
    module_name = f"_mend_harness_{spec.path.stem}_{uuid.uuid4().hex[:8]}"
    mod_spec = importlib.util.spec_from_file_location(module_name, spec.path)
    if mod_spec is None or mod_spec.loader is None:
        raise HarnessError(f"cannot import harness file {spec.path}")
    module = importlib.util.module_from_spec(mod_spec)
    sys.modules[module_name] = module
    try:
        mod_spec.loader.exec_module(module)
    except Exception as exc:  # the user's import failed: say where, keep the cause
        raise HarnessError(f"importing {spec.path} failed: {type(exc).__name__}: {exc}") from exc
    fn = getattr(module, spec.function, None)
    if fn is None:
        available = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise HarnessError(
            f"{spec.path} has no function {spec.function!r}"
            + (f"; callables defined there: {', '.join(available)}" if available else "")
        )
    if not callable(fn):
        raise HarnessError(f"{spec.path}:{spec.function} is not callable")
    try:
        result = fn()
    except Exception as exc:
        raise HarnessError(f"calling {spec} raised {type(exc).__name__}: {exc}") from exc
    return Harness(spec, *_validate(spec, result))


_EXECUTED: set[str] = set()


def record_module_code() -> None:
    """From now on note the file of every module body this process executes (the ``exec`` audit event),
    so that a module loaded around the import system (``spec_from_file_location``, ``runpy``) is seen
    too. Called once per worker process; an audit hook cannot be removed."""
    if getattr(record_module_code, "installed", False):
        return

    def hook(event: str, args: tuple[Any, ...]) -> None:
        if event == "exec" and args:
            filename = getattr(args[0], "co_filename", None)
            if isinstance(filename, str) and not filename.startswith("<"):
                _EXECUTED.add(filename)

    sys.addaudithook(hook)
    record_module_code.installed = True  # type: ignore[attr-defined]


def module_files(roots: Sequence[str | Path] = (), names: Collection[str] = ()) -> dict[str, str]:
    """Where the loaded code came from: real path of a file -> the name of the module loaded from it ("" for
    a file whose code ran, see :func:`record_module_code`, without a module in ``sys.modules``), for each
    file under one of ``roots`` and each module named in ``names``."""
    real_roots = [os.path.realpath(r) for r in roots]
    out: dict[str, str] = {}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and (name in names or any(is_under(os.path.realpath(file), r) for r in real_roots)):
            out[os.path.realpath(file)] = name
    for file in sorted(_EXECUTED):
        real = os.path.realpath(file)
        if real not in out and any(is_under(real, r) for r in real_roots):
            out[real] = ""
    return out


def provided_by(root: str | Path, name: str) -> str | None:
    """The file in ``root`` that ``import name`` loads when ``root`` is first on ``sys.path`` (real path),
    or None when ``root`` holds no such module."""
    base = os.path.join(os.path.realpath(root), *name.split("."))
    for candidate in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(candidate):
            return os.path.realpath(candidate)
    return None


def tree_modules(root: str | Path) -> tuple[list[str], dict[str, str]]:
    """For a folder that should shadow the original modules (put first on ``sys.path``): the files of the
    loaded code inside it (relative paths), and, for every loaded module the folder holds a file for, the
    file it was imported from (module name -> real path)."""
    real_root = os.path.realpath(root)
    inside = sorted(os.path.relpath(f, real_root) for f in module_files([real_root]))
    provided: dict[str, str] = {}
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and provided_by(real_root, name):
            provided[name] = os.path.realpath(file)
    return inside, provided


def _validate(spec: HarnessSpec, result: Any) -> tuple[Callable[..., Any], tuple[Any, ...], dict[str, Any]]:
    if not isinstance(result, (tuple, list)) or len(result) != 3:
        got = type(result).__name__ + (f" of length {len(result)}" if isinstance(result, (tuple, list)) else "")
        raise HarnessError(f"{spec} must return (model_or_fn, args, kwargs); it returned a {got}")
    target, args, kwargs = result
    if not callable(target):
        raise HarnessError(f"{spec}: the first item must be a model or function, got {type(target).__name__}")
    if not isinstance(args, (tuple, list)):
        raise HarnessError(f"{spec}: args must be a tuple or list, got {type(args).__name__}")
    if kwargs is None:
        kwargs = {}
    if not isinstance(kwargs, dict):
        raise HarnessError(f"{spec}: kwargs must be a dict, got {type(kwargs).__name__}")
    return target, tuple(args), dict(kwargs)
