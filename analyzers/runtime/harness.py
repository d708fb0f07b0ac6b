"""Load a user harness: ``path.py:function`` returning ``(model_or_fn, args, kwargs)``.

Shared by ``mend fix --verify`` and ``mend bench``. The harness is user code; loading it imports
torch (through the user's module), so this module itself imports nothing heavy.
"""

from __future__ import annotations

import importlib.util
import sys
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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
