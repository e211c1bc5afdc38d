"""The package version, kept apart so the run file writer can stamp it without imports."""

__version__ = "0.1.0"
