"""Plain data to JSON and back, for mend's caches: nothing read back can run code.

The result cache of ``mend check`` lives in the repository (``.mend_cache/``), where anyone who can push
a commit can write it: it is read as JSON, never unpickled. :func:`encode` turns the cached values
(dataclasses of :data:`TYPES`, enums, tuples, sets, dicts with non-string keys) into JSON values with
``@`` tags; :func:`decode` builds them back, and only from these tags and types: an unknown tag, a
class outside :data:`TYPES`, a missing or extra field raises :class:`DataError`, and the cache that
holds it is treated as empty.
"""

from __future__ import annotations

import dataclasses
import enum
import json
from typing import Any

from mend.analyzers.diagnostic import Applicability, Diagnostic, Edit, Fix, Severity
from mend.analyzers.static.source import Suppressions
from mend.analyzers.static.summary import CallSite, ClassInfo, CompileSite, FileSummary, Finding, FuncInfo

# The only classes a cache file can name.
TYPES: dict[str, type] = {cls.__name__: cls for cls in (
    FileSummary, FuncInfo, ClassInfo, CompileSite, Finding, CallSite, Suppressions,
    Diagnostic, Fix, Edit, Applicability, Severity)}


class DataError(ValueError):
    """A value that is not what mend writes."""


def encode(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float)):
        return value
    if isinstance(value, enum.Enum):
        return {"@e": type(value).__name__, "v": value.value}
    if isinstance(value, str):
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"@": type(value).__name__, "f": fields}
    if isinstance(value, tuple):
        return {"@t": [encode(v) for v in value]}
    if isinstance(value, (set, frozenset)):
        return {"@s" if isinstance(value, set) else "@fs": sorted((encode(v) for v in value), key=repr)}
    if isinstance(value, list):
        return [encode(v) for v in value]
    if isinstance(value, dict):
        if all(isinstance(k, str) for k in value):
            return {"@m": {k: encode(v) for k, v in value.items()}}
        return {"@d": [[encode(k), encode(v)] for k, v in value.items()]}
    raise DataError(f"cannot encode a {type(value).__name__}")


def decode(data: Any) -> Any:
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [decode(v) for v in data]
    if not isinstance(data, dict) or len(data) not in (1, 2):
        raise DataError("not a tagged value")
    if "@" in data:
        cls = TYPES.get(data["@"])
        fields = data.get("f")
        if cls is None or not dataclasses.is_dataclass(cls) or not isinstance(fields, dict):
            raise DataError(f"unknown type {data['@']!r}")
        names = {f.name for f in dataclasses.fields(cls)}
        if not set(fields) <= names:
            raise DataError(f"unknown fields of {cls.__name__}")
        return cls(**{k: decode(v) for k, v in fields.items()})
    if "@e" in data:
        cls = TYPES.get(data["@e"])
        if cls is None or not issubclass(cls, enum.Enum):
            raise DataError(f"unknown enum {data['@e']!r}")
        return cls(data.get("v"))
    (tag, items), = data.items()
    if tag == "@m" and isinstance(items, dict):
        return {k: decode(v) for k, v in items.items()}
    if not isinstance(items, list):
        raise DataError(f"bad {tag}")
    if tag == "@t":
        return tuple(decode(v) for v in items)
    if tag in ("@s", "@fs"):
        return (set if tag == "@s" else frozenset)(decode(v) for v in items)
    if tag == "@d":
        return {_key(decode(k)): decode(v) for k, v in _pairs(items)}
    raise DataError(f"unknown tag {tag!r}")


def _pairs(items: list) -> list:
    if not all(isinstance(p, list) and len(p) == 2 for p in items):
        raise DataError("bad mapping")
    return items


def _key(k: Any) -> Any:
    if isinstance(k, (list, dict, set)):
        raise DataError("unhashable key")
    return k


def dumps(value: Any) -> str:
    return json.dumps(encode(value), separators=(",", ":"))


def loads(text: str | bytes) -> Any:
    """The value :func:`dumps` wrote; :class:`DataError` for anything else (bad JSON, unknown types,
    fields a constructor rejects, nesting too deep)."""
    try:
        return decode(json.loads(text))
    except DataError:
        raise
    except (ValueError, TypeError, KeyError, RecursionError, UnicodeDecodeError) as exc:
        raise DataError(str(exc)) from exc
