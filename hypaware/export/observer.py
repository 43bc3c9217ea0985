"""Watching the export driver: callbacks a host wires to its metrics.

The driver calls an `ExportObserver` as it works. `CountingObserver` keeps
plain counters per sink (what ``hypaware export`` displays);
`hypaware.export.otel.OTelObserver` (the ``hypaware[otel]`` extra) records
OpenTelemetry metrics and spans; a host that reports elsewhere implements the
few callbacks it cares about on a subclass of `NullObserver`. The driver
takes several observers and calls each in turn; a callback an observer does
not have is skipped, and an observer that raises is logged and otherwise
ignored: it never stops an export.

Beyond the protocol, the driver calls these when an observer has them
(`NullObserver` has them all): ``dataset_started(sink, dataset, *, high_water,
skipped_partitions, skipped_rows)``, ``sink_scheduled(sink, schedule,
next_slot)``, ``sink_halted(sink, reason, since, next_try)``,
``sink_resumed(sink, since, attempts)`` and ``maintenance_finished(sink,
report)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, runtime_checkable

import attrs

__all__ = ["CountingObserver", "ExportObserver", "NullObserver", "SinkCounters"]

if TYPE_CHECKING:
    from hypaware.core.types import MaintenanceReport, RequestEvent
    from hypaware.export.reports import SinkReport


@runtime_checkable
class ExportObserver(Protocol):
    """Callbacks from the export driver. All are called on the driver's event loop."""

    def pass_started(self, sink: str) -> None:
        """A pass of `sink` begins (on its schedule, or `run_once`)."""

    def pass_finished(self, sink: str, report: SinkReport) -> None:
        """The pass of `sink` ended with `report` (its `seconds`, `errors` and failures)."""

    def batch_started(self, sink: str, dataset: str, *, batch_id: str, partitions: int) -> None:
        """A batch is handed to `sink`; `batch_exported` follows when it comes back."""

    def retry_wait(
        self, sink: str, dataset: str, *, batch_id: str, seconds: float, cause: str
    ) -> None:
        """The sink waits `seconds` before trying again inside a batch, and why.

        `cause` is a short stable label (``"http 503"``, ``"timeout"``,
        ``"commit-conflict"``, ``"catalog-locked"``, ...), fit for a metric label.
        """

    def request_finished(
        self, sink: str, dataset: str, *, batch_id: str, event: RequestEvent
    ) -> None:
        """The sink made one request to its endpoint while exporting `batch_id`."""

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
        """Partitions the sink did not export; they are respooled for the next tick.
        Called before `batch_exported` of the same batch."""

    def partitions_parked(
        self, sink: str, dataset: str, partition_ids: Sequence[str], reasons: Sequence[str]
    ) -> None:
        """Of the retried partitions, those parked: they failed for good (a 4xx, rows the
        encoder refuses) or `max_partition_attempts` times. Kept in the cache, so no row is
        lost, and no longer retried until an operator runs ``hypaware retry``."""

    def partitions_lost(self, sink: str, dataset: str, partition_ids: Sequence[str]) -> None:
        """Partitions the sink still needed but the cache no longer has (a hard cap)."""

    def lag(self, sink: str, dataset: str, *, partitions: int, rows: int) -> None:
        """What is ready in the cache but not yet exported to `sink`, after a pass."""

    def error(self, sink: str | None, message: str) -> None:
        """Something failed: a sink raised or hung, could not be built, or the state or
        cache could not be read. `sink` is None for failures outside any one sink."""


class NullObserver:
    """An observer that ignores everything; subclass it and override what you need."""

    def pass_started(self, sink: str) -> None:
        return None

    def pass_finished(self, sink: str, report: SinkReport) -> None:
        return None

    def batch_started(self, sink: str, dataset: str, *, batch_id: str, partitions: int) -> None:
        return None

    def retry_wait(
        self, sink: str, dataset: str, *, batch_id: str, seconds: float, cause: str
    ) -> None:
        return None

    def request_finished(
        self, sink: str, dataset: str, *, batch_id: str, event: RequestEvent
    ) -> None:
        return None

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

    def partitions_parked(
        self, sink: str, dataset: str, partition_ids: Sequence[str], reasons: Sequence[str]
    ) -> None:
        return None

    def partitions_lost(self, sink: str, dataset: str, partition_ids: Sequence[str]) -> None:
        return None

    def lag(self, sink: str, dataset: str, *, partitions: int, rows: int) -> None:
        return None

    def error(self, sink: str | None, message: str) -> None:
        return None

    def dataset_started(
        self,
        sink: str,
        dataset: str,
        *,
        high_water: int,
        skipped_partitions: int,
        skipped_rows: int,
    ) -> None:
        """A driver saw `sink` for the first time and fixed its start in `dataset` after
        seq `high_water`: `skipped_partitions` sealed partitions (`skipped_rows` rows)
        are before it, not exported unless backfilled."""

    def sink_scheduled(self, sink: str, schedule: str, next_slot: datetime | None) -> None:
        """`run_forever` runs `sink` on `schedule` (UTC); its next pass is at `next_slot`."""

    def sink_halted(self, sink: str, reason: str, since: datetime, next_try: datetime) -> None:
        """`sink` failed through no fault of its rows (credentials, a missing bucket, a full
        disk, an unreachable endpoint): halted since `since`, nothing parked, tried again
        at `next_try`. Called on every failed try."""

    def sink_resumed(self, sink: str, since: datetime, attempts: int) -> None:
        """`sink` exported again after a halt that began at `since` and took `attempts` tries."""

    def maintenance_finished(self, sink: str, report: MaintenanceReport) -> None:
        """The driver maintained `sink`'s destination (on its schedule, or when asked);
        `report.errors` says what failed."""


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
    parked: int = 0
    passes: int = 0
    last_error: str | None = None
    #: The halt the sink is in (its reason), or None.
    halted: str | None = None
    halts: int = 0
    #: Waits taken inside batches, by cause.
    retry_waits: dict[str, int] = attrs.field(factory=dict)
    retry_wait_seconds: float = 0.0
    #: Maintenance runs, those that failed a step, and the last one's summary.
    maintenance_runs: int = 0
    maintenance_failures: int = 0
    last_maintenance: str | None = None


class CountingObserver(NullObserver):
    """Counters per sink (``counters[name]``), for displays and tests."""

    def __init__(self) -> None:
        self.counters: dict[str, SinkCounters] = {}
        self.global_errors: list[str] = []
        self._lag: dict[tuple[str, str], tuple[int, int]] = {}

    def of(self, sink: str) -> SinkCounters:
        return self.counters.setdefault(sink, SinkCounters())

    def maintenance_finished(self, sink: str, report: MaintenanceReport) -> None:
        c = self.of(sink)
        c.maintenance_runs += 1
        c.maintenance_failures += 0 if report.ok else 1
        c.last_maintenance = report.summary()

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

    def partitions_parked(
        self, sink: str, dataset: str, partition_ids: Sequence[str], reasons: Sequence[str]
    ) -> None:
        self.of(sink).parked += len(partition_ids)

    def pass_finished(self, sink: str, report: SinkReport) -> None:
        self.of(sink).passes += 1

    def sink_halted(self, sink: str, reason: str, since: datetime, next_try: datetime) -> None:
        c = self.of(sink)
        if c.halted is None:
            c.halts += 1
        c.halted = reason

    def sink_resumed(self, sink: str, since: datetime, attempts: int) -> None:
        self.of(sink).halted = None

    def retry_wait(
        self, sink: str, dataset: str, *, batch_id: str, seconds: float, cause: str
    ) -> None:
        c = self.of(sink)
        c.retry_waits[cause] = c.retry_waits.get(cause, 0) + 1
        c.retry_wait_seconds += seconds

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
