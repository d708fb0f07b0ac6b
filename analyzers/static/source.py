"""Reading source files and mapping ``ast`` positions to ruff-style columns.

``ast`` reports ``col_offset`` as a UTF-8 *byte* offset into the line; mend reports 1-based
*character* columns (like ruff and SARIF). :class:`LineIndex` does that conversion, with a fast path
for ASCII lines. Suppression comments (``# noqa``, ``# noqa: MND101``, file-level ``# mend: noqa``)
are read from the token stream so that a ``# noqa`` inside a string literal is not a suppression.
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass, field

NOQA_RE = re.compile(r"#\s*noqa(?::\s*(?P<codes>[A-Z]+[0-9]*(?:[\s,]+[A-Z]+[0-9]*)*))?", re.IGNORECASE)
FILE_NOQA_RE = re.compile(r"#\s*mend\s*:\s*noqa\b(?::\s*(?P<codes>[A-Z]+[0-9]*(?:[\s,]+[A-Z]+[0-9]*)*))?", re.I)
ALL = "ALL"


class UnreadableSource(Exception):
    """The bytes are not a Python source file mend can read (binary, or not in their declared encoding)."""


@dataclass(frozen=True, slots=True)
class SourceText:
    """A source file's text and the encoding it is stored in, as Python itself reads it.

    ``encoding`` is what :func:`tokenize.detect_encoding` found: ``"utf-8"`` by default, ``"utf-8-sig"``
    for a file that starts with a byte order mark, or the codec of a PEP 263 coding line
    (``# -*- coding: latin-1 -*-`` gives ``"iso-8859-1"``). :meth:`encode` writes text back the same way,
    BOM included, and refuses text that the file's encoding cannot hold or that would no longer decode
    to itself (a coding line moved or changed)."""

    text: str
    encoding: str = "utf-8"

    @property
    def bom(self) -> bool:
        return self.encoding == "utf-8-sig"

    def encode(self, text: str) -> bytes:
        try:
            data = text.encode(self.encoding)
        except UnicodeEncodeError as exc:
            bad = exc.object[exc.start:exc.end]
            raise UnreadableSource(f"the new text has {bad!r}, which {self.encoding} cannot encode") from None
        try:
            same = decode(data) == SourceText(text, self.encoding)
        except UnreadableSource:
            same = False
        if not same:
            raise UnreadableSource(f"the new text would not read back as {self.encoding} (coding line changed?)")
        return data


def decode(data: bytes) -> SourceText:
    """Decode bytes as Python source: BOM and PEP 263 coding lines honoured, NUL bytes refused.

    The one decoder of ``mend check`` and ``mend fix``: both see the same text."""
    if b"\x00" in data:
        raise UnreadableSource("file contains NUL bytes (binary file?)")
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as exc:
        raise UnreadableSource(f"cannot determine the encoding: {exc}") from None
    try:
        text = data.decode(encoding)
    except (UnicodeDecodeError, LookupError) as exc:
        raise UnreadableSource(f"not valid {encoding}: {exc}") from None
    return SourceText(text, encoding)


def decode_source(data: bytes) -> str:
    """The text of a source file's bytes (see :func:`decode`)."""
    return decode(data).text


class LineIndex:
    """Maps ``ast`` (line, byte column) pairs to 1-based character columns."""

    __slots__ = ("lines",)

    def __init__(self, source: str) -> None:
        self.lines = source.splitlines()

    def col(self, line: int, byte_col: int) -> int:
        if 1 <= line <= len(self.lines):
            text = self.lines[line - 1]
            if not text.isascii():
                return len(text.encode("utf-8")[:byte_col].decode("utf-8", errors="replace")) + 1
        return byte_col + 1

    def text(self, line: int) -> str:
        return self.lines[line - 1] if 1 <= line <= len(self.lines) else ""


@dataclass(slots=True)
class Suppressions:
    """``# noqa`` comments of one file: per line, a set of codes or prefixes (``{"ALL"}`` = bare noqa)."""

    lines: dict[int, frozenset[str]] = field(default_factory=dict)
    file_codes: frozenset[str] = frozenset()  # file-level ``# mend: noqa``; {"ALL"} silences the file

    def suppressed(self, code: str, line: int, end_line: int | None = None) -> bool:
        if _matches(code, self.file_codes):
            return True
        codes = self.lines.get(line)
        if codes is not None and _matches(code, codes):
            return True
        # A multi-line statement may carry its noqa on the last line, like ruff.
        if end_line is not None and end_line != line:
            codes = self.lines.get(end_line)
            if codes is not None and _matches(code, codes):
                return True
        return False


def _matches(code: str, codes: frozenset[str]) -> bool:
    return bool(codes) and (ALL in codes or any(code.startswith(c) for c in codes))


def _parse_codes(text: str | None) -> frozenset[str]:
    if not text:
        return frozenset({ALL})
    return frozenset(c.upper() for c in re.split(r"[\s,]+", text.strip()) if c)


def read_suppressions(source: str) -> Suppressions:
    """Collect ``# noqa`` comments. Cheap: skipped entirely when the text has no ``noqa``."""
    sup = Suppressions()
    if "noqa" not in source and "NOQA" not in source:
        return sup
    file_codes: set[str] = set()
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (tokenize.TokenError, SyntaxError, IndentationError):
        return sup
    for tok in tokens:
        if tok.type != tokenize.COMMENT:
            continue
        fm = FILE_NOQA_RE.search(tok.string)
        if fm:
            file_codes |= _parse_codes(fm.group("codes"))
            continue
        m = NOQA_RE.search(tok.string)
        if m:
            sup.lines[tok.start[0]] = _parse_codes(m.group("codes"))
    sup.file_codes = frozenset(file_codes)
    return sup
