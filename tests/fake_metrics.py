"""A MetricsSource whose counters a test sets: exact numbers for the recorder's unit tests."""

from __future__ import annotations


class Counters:
    """Counter values by torch_xla's names; no metric samples."""

    def __init__(self, values: dict[str, int] | None = None) -> None:
        self.values: dict[str, int] = dict(values or {})

    def counter_names(self) -> list[str]:
        return list(self.values)

    def counter_value(self, name: str) -> int | None:
        return self.values.get(name)

    def samples(self, name: str) -> list[tuple[float, float]]:
        return []
