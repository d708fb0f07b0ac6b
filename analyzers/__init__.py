"""mend.analyzers: find graph breaks and recompiles.

``static`` reads source without importing torch; ``runtime`` records what Dynamo really does.
Both produce :class:`mend.analyzers.diagnostic.Diagnostic` values.
"""

from mend.analyzers.diagnostic import Applicability, Diagnostic, Edit, Fix, Severity
from mend.version import __version__

__all__ = ["Applicability", "Diagnostic", "Edit", "Fix", "Severity", "__version__"]
