"""``warmup``: every compile of the first two training steps, never a finding.

Step 0 builds the optimizer state, step 1 runs the steady graph; the empty barriers between
them, and torch.compile's own syncs while it traces them, are theirs too. The walk
(:func:`xprof.diagnosis.walk.judge`) gives them this cause before any rule is asked.
"""

from __future__ import annotations

from xprof.diagnosis.cause import CauseName
from xprof.diagnosis.unit import CauseUnit

WARMUP = CauseUnit(
    CauseName.WARMUP, label='warm-up', colour='#9aa5b1',
    means=('every compile in the first two training steps (step 0 builds optimizer state; step 1 is the steady '
        'graph), host reads included'),
    fix=('none: expected, never a finding'),
    fix_safety=("Nothing to apply: warm-up's compiles are expected."),
)
