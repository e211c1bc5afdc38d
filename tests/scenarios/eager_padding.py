"""``padding_dict``'s loop in eager mode: a new length compiles the ops it reaches again,
one by one, in the middle of the step."""

from typing import Any

from torch_xla.experimental import eager_mode_context

from tests.scenarios import padding_dict


def train(device: Any, steps: int = 12) -> None:
    with eager_mode_context(True):
        padding_dict.train(device, steps, dim=24)
