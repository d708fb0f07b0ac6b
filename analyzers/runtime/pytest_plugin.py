"""pytest plugin entry point for ``pytest --mend`` (under construction)."""
