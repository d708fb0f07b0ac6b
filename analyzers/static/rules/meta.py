"""MND9xx: mend's own diagnostics: files it cannot analyse, and runtime findings no rule predicts."""

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
             "not readable; or one whose analysis took longer than `MEND_FILE_TIME_LIMIT` seconds.",
        why="mend cannot analyse it; the run goes on with the other files.",
        use_instead="Exclude the file (`exclude` in `[tool.mend]`), fix its encoding, or raise the time limit.",
    ),
    Rule(
        "MND990", "runtime-break-without-rule", "graph break recorded at run time that no rule predicts", ("-",),
        "runtime",
        what="Reported by `mend report` for a graph break `mend run` recorded where no rule applies.",
        why="The break costs what any break costs; mend has no static rule (and no fix) for its cause yet.",
        use_instead="Read Dynamo's reason in the report (`mend report --format json` has the full message).",
    ),
    Rule(
        "MND991", "runtime-recompile-without-rule", "recompile recorded at run time that no rule predicts", ("-",),
        "runtime",
        what="Reported by `mend report` for a recompile `mend run` recorded whose failed guard no rule predicts.",
        why="Every recompile compiles the frame again; after the recompile limit the frame runs eagerly.",
        use_instead="Read the failed guard in the report and keep that value stable across calls.",
    ),
)
