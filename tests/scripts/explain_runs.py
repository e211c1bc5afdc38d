"""Record the loops tests/test_explain.py checks, in a fresh torch_xla process (so no graph of
theirs is cached from another test): ``python explain_runs.py OUT_DIR on|off|auto``.

Writes ``OUT_DIR/NAME.json`` for each loop under ``watch(explain=...)`` and
``OUT_DIR/ir_debug.json``: torch_xla's ``ir_debug`` before and after the watches.
"""

from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

LOOPS = {
    "lr_schedule_scalar": "tests.corpus.loops.lr_schedule_scalar",
    "every_n_steps": "tests.scenarios.every_n_steps",
    "slice_bound": "tests.scenarios.slice_bound",
    "growing_list": "tests.corpus.loops.growing_list",
}


AUTO_LOOPS = {
    "loss_weight_one_then_zero": "tests.corpus.loops.loss_weight_one_then_zero",
    "padding_collate_loader": "tests.scenarios.padding_collate_loader",
    "eval_pass": "tests.scenarios.eval_pass",
}
"""Recorded with ``auto`` (``explain=None``, the default): two graph changes with the same
inputs, then loops whose compiles the rules explain (padding, an evaluation's own graphs)."""


def main(out: Path, mode: str) -> None:
    import torch_xla

    import xprof

    before = bool(torch_xla._XLAC._get_ir_debug())
    explain = {"on": True, "off": False, "auto": None}[mode]
    if mode == "auto":
        # These tiny loops check the trigger at an unexplained graph change; the other trigger,
        # steps long enough that the mode is cheap (tests/test_explain_long_steps.py), would
        # fire here on a loaded machine, where a millisecond step takes a hundred.
        from xprof.diagnosis import terms

        terms.EXPLAIN_SHARE = 0.0
    for name, module in (AUTO_LOOPS if mode == "auto" else LOOPS).items():
        mod = importlib.import_module(module)
        with xprof.watch(out / f"{name}.json", name=name, live=False, explain=explain):
            mod.train(torch_xla.device())
    after = bool(torch_xla._XLAC._get_ir_debug())
    (out / "ir_debug.json").write_text(json.dumps({"before": before, "after": after}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), sys.argv[2])
