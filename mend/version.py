"""mend's version: one value, imported by every part that records or compares it (caches, data files, reports).

A module of its own, below everything: the package root imports it, and nothing that imports it needs the
package root's other contents."""

__version__ = "0.1.0"
