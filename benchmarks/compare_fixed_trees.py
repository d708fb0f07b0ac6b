"""Do two trees repaired by two versions of `mend fix` hold the same code, helpers aside?

For a refactor of the rewriter: fix copies of one tree with the old and the new mend, then

    python benchmarks/compare_fixed_trees.py OLD_TREE NEW_TREE

compares every Python file (but the tree's helper module ``_mend.py``) by its syntax tree, leaving out what
only says where the helpers live: top-level definitions and statements of ``_mend_*`` helpers pasted into a
file (older releases) and ``from ._mend import ...`` / ``from _mend import ...`` (the tree's helper module).
Comments and formatting are not compared. Prints each file that differs and a total; exit 1 when one does.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

HELPER_MODULE = "_mend"


def _helper_statement(node: ast.stmt) -> bool:
    if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
        return node.name.startswith("_mend")
    if isinstance(node, ast.ImportFrom):
        return node.module == HELPER_MODULE
    text = ast.unparse(node)
    return text.startswith("_mend") or text.startswith("getattr(torch._dynamo.eval_frame, 'skip_code'")


def normalized(path: Path) -> str:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    tree.body = [n for n in tree.body if not _helper_statement(n)]
    return ast.dump(tree, include_attributes=False)


def main(argv: list[str]) -> int:
    old, new = Path(argv[0]), Path(argv[1])
    files = sorted(p for p in old.rglob("*.py") if p.name != f"{HELPER_MODULE}.py")
    differ = [p for p in files if not (new / p.relative_to(old)).is_file()
              or normalized(p) != normalized(new / p.relative_to(old))]
    for p in differ:
        print(f"differs: {p.relative_to(old)}")
    print(f"{len(files)} files compared, {len(differ)} differ")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
