"""The model zoo: every transformers model type from a shrunk config, original vs `mend fix` vs
`mend fix --unsafe-fixes`: what builds and runs, graph breaks before -> after per Dynamo reason class,
and every model whose eager output the repair changed. A thin front end over ``mend.zoo``.

    python benchmarks/zoo.py --jobs 2 --json zoo.json
    python benchmarks/zoo.py --help
"""

from mend.zoo.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
