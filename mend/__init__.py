"""mend: find, repair and prove away torch.compile graph breaks and recompiles.

The package root holds only what every part shares (the version). The parts live in their own
folders: ``mend.analyzers`` (find), ``mend.rewriter`` (repair), ``mend.compiler`` (the backend),
``mend.bench`` (before/after timings), ``mend.cli`` (the commands). Importing ``mend`` imports nothing
else, and never torch.
"""

__version__ = "0.1.0"
