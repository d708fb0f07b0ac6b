"""mend's start-up hook for child processes: repair imports when ``MEND_REPAIR`` is set, record graph
breaks when ``MEND_RUN_CHILDREN`` is (the child of a program ``mend run`` records:
:mod:`mend.analyzers.runtime.children`).

``mend run --repair`` and ``mend.repair_imports`` put this folder first on ``PYTHONPATH``; Python imports
``sitecustomize`` at start-up, before the program. After installing the hook, the ``sitecustomize`` this
one shadows (a distribution's or the user's, later on ``sys.path``) runs as it would have.
"""

import os
import sys


def _install() -> None:
    if not os.environ.get("MEND_REPAIR"):
        return
    try:
        from mend.imports import install_from_env
    except ImportError as exc:  # mend is not importable in this interpreter
        print(f"mend: MEND_REPAIR is set but mend cannot be imported ({exc}); imports are not repaired",
              file=sys.stderr)
        return
    install_from_env()


def _chain() -> None:
    """Run the next ``sitecustomize`` on ``sys.path`` (the one this file shadows), if there is one."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    sys.modules["sitecustomize"] = module
    spec.loader.exec_module(module)


def _record() -> None:
    if not os.environ.get("MEND_RUN_CHILDREN"):
        return
    try:
        from mend.analyzers.runtime.children import install_from_env
    except ImportError as exc:
        print(f"mend: MEND_RUN_CHILDREN is set but mend cannot be imported ({exc}); breaks here are not recorded",
              file=sys.stderr)
        return
    install_from_env()


if __name__ == "sitecustomize":  # run by Python at start-up (not imported as mend.imports.startup.sitecustomize)
    _install()
    _record()
    _chain()
