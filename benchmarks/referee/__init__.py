"""The public-scripts referee: torch_xla's own counters and debug output against xprof's summary.

``python -m benchmarks.referee SCRIPTS_DIR`` runs every script of the folder's manifest twice
(plainly, with torch_xla's counters and ``PT_XLA_DEBUG_LEVEL=2``; then under ``xprof run``)
and prints one table. docs/public-scripts.md says what each column means.
"""
