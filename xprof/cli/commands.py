"""Imports every command module so each registers its commands on the app.

Each module owns a group of commands: ``commands_report`` (report, summary, demo),
``commands_compare`` (compare), ``commands_run`` (run, export).
"""

import importlib

for _name in ("commands_report", "commands_compare", "commands_run", "commands_digest"):
    try:
        importlib.import_module(f"xprof.cli.{_name}")
    except ModuleNotFoundError as _exc:  # a command group not built yet
        if _exc.name != f"xprof.cli.{_name}":
            raise
