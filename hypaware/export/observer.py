"""Watching the export driver: callbacks a host wires to its metrics.

The driver calls an `ExportObserver` as it works. `CountingObserver` keeps
plain counters per sink (what ``hypaware export`` displays); a host that
reports to Prometheus or OpenTelemetry implements the few callbacks it cares
about on a subclass of `NullObserver`. An observer that raises is logged and
otherwise ignored: it never stops an export.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import attrs

__all__ = ["CountingObserver", "ExportObserver", "NullObserver", "SinkCounters"]


@runtime_checkable
class ExportObserver(Protocol):
    """Callbacks from the export driver. All are called on the driver's event loop."""

    def batch_exported(
        self,
        sink: str,
        dataset: str,
        *,
        batch_id: str,
        partitions: int,
        rows: int,
        bytes: int,
        files: int,
        seconds: float,
    ) -> None:
        """A batch came back from its sink; the counts cover the partitions it acked."""

    def partitions_retried(
        self, sink: str, dataset: str, partition_ids: Sequence[str], reasons: Sequence[str]
    ) -> None:
        """Partitions the sink did not export; they are respooled for the next tick."""

    def partitions_lost(self, sink: str, dataset: str, partition_ids: Sequence[str]) -> None:
        """Partitions the sink still needed but the cache no longer has (a hard cap)."""

    def lag(self, sink: str, dataset: str, *, partitions: int, rows: int) -> None:
        """What is ready in the cache but not yet exported to `sink`, after a pass."""

    def error(self, sink: str | None, message: str) -> None:
        """Something failed: a sink raised or hung, could not be built, or the state or
        cache could not be read. `sink` is None for failures outside any one sink."""

    def retry_wait(self, *, sink: str, dataset: str, cause: str, seconds: float) -> None:
        """A sink is about to wait `seconds` before retrying inside a batch.

        `cause` is a short stable name (``"commit-conflict"``,
        ``"catalog-locked"``, ...), fit for a metric label. Observers written
        before this callback existed are skipped for it.
        """


class NullObserver:
    """An observer that ignores everything; subclass it and override what you need."""

    def batch_exported(
        self,
        sink: str,
        dataset: str,
        *,
        batch_id: str,
        partitions: int,
        rows: int,
        bytes: int,
        files: int,
        seconds: float,
    ) -> None:
        return None

    def partitions_retried(
        self, sink: str, dataset: str, partition_ids: Sequence[str], reasons: Sequence[str]
    ) -> None:
        return None

    def partitions_lost(self, sink: str, dataset: str, partition_ids: Sequence[str]) -> None:
        return None

    def lag(self, sink: str, dataset: str, *, partitions: int, rows: int) -> None:
        return None

    def error(self, sink: str | None, message: str) -> None:
        return None

    def retry_wait(self, *, sink: str, dataset: str, cause: str, seconds: float) -> None:
        return None


@attrs.define
class SinkCounters:
    """Running totals for one sink."""

    batches: int = 0
    partitions: int = 0
    rows: int = 0
    bytes: int = 0
    files: int = 0
    retries: int = 0
    lost: int = 0
    errors: int = 0
    lag_partitions: int = 0
    lag_rows: int = 0
    last_error: str | None = None
    retry_waits: dict[str, int] = attrs.field(factory=dict)
    retry_wait_seconds: float = 0.0


class CountingObserver(NullObserver):
    """Counters per sink (``counters[name]``), for displays and tests."""

    def __init__(self) -> None:
        self.counters: dict[str, SinkCounters] = {}
        self.global_errors: list[str] = []
        self._lag: dict[tuple[str, str], tuple[int, int]] = {}

    def of(self, sink: str) -> SinkCounters:
        return self.counters.setdefault(sink, SinkCounters())

    def batch_exported(
        self,
        sink: str,
        dataset: str,
        *,
        batch_id: str,
        partitions: int,
        rows: int,
        bytes: int,
        files: int,
        seconds: float,
    ) -> None:
        c = self.of(sink)
        c.batches += 1
        c.partitions += partitions
        c.rows += rows
        c.bytes += bytes
        c.files += files

    def partitions_retried(
        self, sink: str, dataset: str, partition_ids: Sequence[str], reasons: Sequence[str]
    ) -> None:
        self.of(sink).retries += len(partition_ids)

    def partitions_lost(self, sink: str, dataset: str, partition_ids: Sequence[str]) -> None:
        self.of(sink).lost += len(partition_ids)

    def lag(self, sink: str, dataset: str, *, partitions: int, rows: int) -> None:
        self._lag[(sink, dataset)] = (partitions, rows)
        c = self.of(sink)
        c.lag_partitions = sum(p for (s, _), (p, _) in self._lag.items() if s == sink)
        c.lag_rows = sum(r for (s, _), (_, r) in self._lag.items() if s == sink)

    def error(self, sink: str | None, message: str) -> None:
        if sink is None:
            self.global_errors.append(message)
            return
        c = self.of(sink)
        c.errors += 1
        c.last_error = message

    def retry_wait(self, *, sink: str, dataset: str, cause: str, seconds: float) -> None:
        c = self.of(sink)
        c.retry_waits[cause] = c.retry_waits.get(cause, 0) + 1
        c.retry_wait_seconds += seconds
