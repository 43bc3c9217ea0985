"""The driver's one observer: each callback passed on to every observer that has it.

The driver and its parts call an `ObserverFanout` as they would one observer,
so every call is checked against the callback's signature. It passes each on
to the host's observers in turn: one written before a callback existed does
not have it and is skipped, and one that raises is logged and otherwise
ignored, so an observer never stops an export.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hypaware.core.types import MaintenanceReport, RequestEvent
    from hypaware.export.reports import SinkReport

__all__ = ["ObserverFanout"]

log = logging.getLogger("hypaware.export.driver")


class ObserverFanout:
    """Every `ExportObserver` callback (and the driver's extra ones), sent to `observers`."""

    def __init__(self, observers: Sequence[object]) -> None:
        self.observers = list(observers)

    def _each(self, pick: Callable[[Any], Callable[..., object]]) -> Iterator[Callable[..., None]]:
        """For each observer that has the callback `pick` takes from it, a guarded caller."""
        for observer in self.observers:
            try:
                callback = pick(observer)
            except AttributeError:
                continue  # written before this callback existed
            yield _guarded(observer, callback)

    def pass_started(self, sink: str) -> None:
        for call in self._each(lambda o: o.pass_started):
            call(sink)

    def pass_finished(self, sink: str, report: SinkReport) -> None:
        for call in self._each(lambda o: o.pass_finished):
            call(sink, report)

    def batch_started(self, sink: str, dataset: str, *, batch_id: str, partitions: int) -> None:
        for call in self._each(lambda o: o.batch_started):
            call(sink, dataset, batch_id=batch_id, partitions=partitions)

    def retry_wait(
        self, sink: str, dataset: str, *, batch_id: str, seconds: float, cause: str
    ) -> None:
        for call in self._each(lambda o: o.retry_wait):
            call(sink, dataset, batch_id=batch_id, seconds=seconds, cause=cause)

    def request_finished(
        self, sink: str, dataset: str, *, batch_id: str, event: RequestEvent
    ) -> None:
        for call in self._each(lambda o: o.request_finished):
            call(sink, dataset, batch_id=batch_id, event=event)

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
        for call in self._each(lambda o: o.batch_exported):
            call(
                sink,
                dataset,
                batch_id=batch_id,
                partitions=partitions,
                rows=rows,
                bytes=bytes,
                files=files,
                seconds=seconds,
            )

    def partitions_retried(
        self, sink: str, dataset: str, partition_ids: Sequence[str], reasons: Sequence[str]
    ) -> None:
        for call in self._each(lambda o: o.partitions_retried):
            call(sink, dataset, partition_ids, reasons)

    def partitions_parked(
        self, sink: str, dataset: str, partition_ids: Sequence[str], reasons: Sequence[str]
    ) -> None:
        for call in self._each(lambda o: o.partitions_parked):
            call(sink, dataset, partition_ids, reasons)

    def partitions_lost(self, sink: str, dataset: str, partition_ids: Sequence[str]) -> None:
        for call in self._each(lambda o: o.partitions_lost):
            call(sink, dataset, partition_ids)

    def lag(self, sink: str, dataset: str, *, partitions: int, rows: int) -> None:
        for call in self._each(lambda o: o.lag):
            call(sink, dataset, partitions=partitions, rows=rows)

    def error(self, sink: str | None, message: str) -> None:
        for call in self._each(lambda o: o.error):
            call(sink, message)

    def dataset_started(
        self,
        sink: str,
        dataset: str,
        *,
        high_water: int,
        skipped_partitions: int,
        skipped_rows: int,
    ) -> None:
        for call in self._each(lambda o: o.dataset_started):
            call(
                sink,
                dataset,
                high_water=high_water,
                skipped_partitions=skipped_partitions,
                skipped_rows=skipped_rows,
            )

    def sink_scheduled(self, sink: str, schedule: str, next_slot: datetime | None) -> None:
        for call in self._each(lambda o: o.sink_scheduled):
            call(sink, schedule, next_slot)

    def sink_halted(self, sink: str, reason: str, since: datetime, next_try: datetime) -> None:
        for call in self._each(lambda o: o.sink_halted):
            call(sink, reason, since, next_try)

    def sink_resumed(self, sink: str, since: datetime, attempts: int) -> None:
        for call in self._each(lambda o: o.sink_resumed):
            call(sink, since, attempts)

    def maintenance_finished(self, sink: str, report: MaintenanceReport) -> None:
        for call in self._each(lambda o: o.maintenance_finished):
            call(sink, report)


def _guarded(observer: object, callback: Callable[..., object]) -> Callable[..., None]:
    def call(*args: Any, **kwargs: Any) -> None:
        try:
            callback(*args, **kwargs)
        except Exception:
            log.exception("observer %r failed in %r", observer, callback)

    return call
