"""mend: find, repair and prove away torch.compile graph breaks and recompiles.

The package root holds only what every part shares (the version, from :mod:`mend.version`). The parts live in their own
folders: ``mend.analyzers`` (find), ``mend.rewriter`` (repair), ``mend.compiler`` (the backend),
``mend.bench`` (before/after timings), ``mend.cli`` (the commands), ``mend.imports`` (repairs at import:
:func:`repair_imports` below). Importing ``mend`` imports nothing else, and never torch.
"""

from mend.version import __version__

__all__ = ["__version__", "repair_imports"]


def repair_imports(packages, **options):  # noqa: ANN001, ANN003, ANN201
    """Repair the modules of ``packages`` (e.g. ``["transformers"]``) with ``mend fix`` as they are imported.

    Call it before the imports; child processes repair too. See :func:`mend.imports.repair_imports`
    (the options) and ``docs/imports.md``. Loads the standard library only."""
    from mend.imports import repair_imports as _repair_imports

    return _repair_imports(packages, **options)
