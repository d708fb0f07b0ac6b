"""MND9xx: mend's own diagnostics about files it cannot analyse."""

from __future__ import annotations

from mend.analyzers.static.rules.base import Rule, register

register(
    Rule(
        "MND901", "syntax-error", "file does not parse as Python", ("-",), "meta",
        what="Reports a file that Python's parser rejects; no other rule runs on it.",
        why="mend cannot analyse what it cannot parse; the file would also fail at import time.",
        use_instead="Fix the syntax error (the message gives the parser's reason and position).",
    ),
    Rule(
        "MND902", "unreadable-file", "file cannot be read as Python source", ("-",), "meta",
        what="Reports a file that cannot be read: not valid UTF-8 (or its declared encoding), binary, or "
             "not readable.",
        why="mend cannot analyse it; the run goes on with the other files.",
        use_instead="Exclude the file (`exclude` in `[tool.mend]`) or fix its encoding.",
    ),
)
