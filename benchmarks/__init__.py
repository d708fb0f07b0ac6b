"""mend's measurement harnesses and benchmark scripts: not part of the installed ``mend``.

``benchmarks/zoo/`` is the model-zoo harness (``python -m benchmarks.zoo``); each ``benchmarks/*.py`` is a
script that prints a table; ``benchmarks/results/`` holds their raw outputs. They import ``mend``; nothing
in ``mend`` imports them. Run them from the repository root (see benchmarks/README.md).
"""
