"""The folder ``mend run --repair`` and ``mend.repair_imports`` put first on ``PYTHONPATH``: it holds only
``sitecustomize``, which installs the import hook in every child process when ``MEND_REPAIR`` is set."""
