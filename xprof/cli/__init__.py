"""Command line: ``xprof report|summary|compare|run|export|demo``."""

from xprof.cli.app import main

__all__ = ["main"]
