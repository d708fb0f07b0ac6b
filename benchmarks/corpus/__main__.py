"""``python -m benchmarks.corpus SUITE``: run one corpus in eval and training mode, original against the
copies ``mend fix`` and ``mend fix --unsafe-fixes`` repaired, and print the zoo's tables and the corpus report.

    python -m benchmarks.corpus repos --checkouts /tmp/mend-corpus --json repos.json
    python -m benchmarks.corpus torchvision --json torchvision.json --scope traced
    python -m benchmarks.corpus timm --models resnet18,vit_tiny_patch16_224 --json timm.json

Every option after the suite goes to ``python -m benchmarks.zoo`` (``--models``, ``--jobs``, ``--timeout``,
``--scope``, ``--cache-dir``, ``--out``...); ``--modes`` defaults to ``eval,train`` and ``--json`` is required
(the report reads it). Exit code 1 when a repair changed an eager output or made a row worse.
"""

from __future__ import annotations

import sys

from benchmarks.corpus import report
from benchmarks.zoo.cli import main as zoo_main
from benchmarks.zoo.suites import SUITES


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help") or args[0] not in SUITES:
        print(__doc__)
        print(f"suites: {', '.join(SUITES)}")
        return 0 if args and args[0] in ("-h", "--help") else 2
    suite, rest = args[0], args[1:]
    if "--json" not in rest:
        print("--json PATH is required: the report reads the result file", file=sys.stderr)
        return 2
    if "--modes" not in rest and "--mode" not in rest:
        rest += ["--modes", "eval,train"]
    code = zoo_main(["--suite", suite, *rest])
    result = rest[rest.index("--json") + 1]
    return max(code, report.main([result]))


if __name__ == "__main__":
    raise SystemExit(main())
