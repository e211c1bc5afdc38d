"""``python -m xprof ...`` is the same as ``xprof ...``."""

from xprof.cli import main

main()
