"""What groups compiles and host reads into one finding: its key, whose text is the finding's id."""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple


class FindingKey(NamedTuple):
    """What groups compiles and host reads into one finding; ``str(key)`` is the finding's id.

    ``group`` is ``sync`` (a host-read site), ``input`` (an input that changed shape),
    ``sharding`` (an input whose SPMD sharding changed with the same shapes),
    ``fallback`` (CPU-fallback ops), ``graph`` (a graph of that many nodes), ``eval``,
    ``unknown`` or ``warmup``; ``detail`` the site id, input name, ops, node count or reason.
    """

    group: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.group}:{self.detail}" if self.detail else self.group

    @classmethod
    def parse(cls, text: str) -> FindingKey:
        group, _, detail = text.partition(":")
        return cls(group, detail)

    @classmethod
    def sync(cls, site: int) -> FindingKey:
        return cls("sync", str(site))

    @classmethod
    def input(cls, name: str | None) -> FindingKey:
        return cls("input", name or "?")

    @classmethod
    def sharding(cls, name: str | None) -> FindingKey:
        return cls("sharding", name or "?")

    @classmethod
    def fallback(cls, ops: Iterable[str]) -> FindingKey:
        return cls("fallback", ",".join(sorted(ops)))

    @classmethod
    def graph(cls, nodes: int | None) -> FindingKey:
        return cls("graph", str(nodes))

    @property
    def site(self) -> int | None:
        """The host-read site of a ``sync`` key."""
        return int(self.detail) if self.group == "sync" and self.detail.lstrip("-").isdigit() else None

    @property
    def ops(self) -> list[str]:
        """The CPU-fallback ops of a ``fallback`` key."""
        return self.detail.split(",") if self.group == "fallback" and self.detail else []


WARMUP_KEY = FindingKey("warmup")
ABSTAIN_KEY = FindingKey("abstain")
"""Live only: a rule that needs the whole run may own the compile (no notice, no finding)."""
EVAL_KEY = FindingKey("eval")
EAGER_KEY = FindingKey("eager")
EVAL_MODE_KEY = FindingKey("graph", "eval_mode")
"""Training steps run with the model left in eval mode (``model.eval()`` not undone)."""
CUT_BY_PASS_KEY = FindingKey("joined", "began")
"""Training steps whose pending ops ran at the first barrier of a pass begun before theirs."""
