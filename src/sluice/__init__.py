"""Sluice: a self-hostable workflow platform running Pipedream-style Node.js components."""

__version__ = "0.1.0"
#: Reported as ``platform_version`` in run contexts.
PLATFORM_VERSION = __version__
