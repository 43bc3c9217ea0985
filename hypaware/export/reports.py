"""What an export pass did: `SinkReport` per sink, `RunReport` per `run_once`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

__all__ = ["RunReport", "SinkReport"]


@attrs.define
class SinkReport:
    """What one pass did for one sink."""

    sink: str
    batches: int = 0
    partitions: int = 0
    rows: int = 0
    bytes: int = 0
    files: int = 0
    retried: int = 0
    lost: int = 0
    lag_partitions: int = 0
    lag_rows: int = 0
    errors: list[str] = attrs.field(factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.errors and not self.retried

    def as_dict(self) -> dict[str, Any]:
        return attrs.asdict(self)


@attrs.frozen
class RunReport:
    """What `run_once` did, by sink name."""

    sinks: Mapping[str, SinkReport]

    @property
    def partitions(self) -> int:
        return sum(r.partitions for r in self.sinks.values())

    @property
    def rows(self) -> int:
        return sum(r.rows for r in self.sinks.values())

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.sinks.values())
