"""Sink maintenance as the driver runs it: on the sink's own schedule, between passes.

A sink that is a `MaintainedSink` (an Iceberg sink) names a cron schedule.
After each pass the driver asks whether a run is due: never run yet, or the
schedule has fired since the last one (by the driver's clock, so the time is
the same in a daemon, in ``export --once`` every five minutes from cron, and
under a test's clock). When due it runs under the sink's pass lock, records
when and what in the progress store (``status`` shows it), logs one line,
tells observers (`maintenance_finished`) and puts the report on the pass's
`SinkReport.maintenance`. A failed run is logged as a warning and put in the
pass's notices: the pass's rows were exported all the same.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import TYPE_CHECKING, Any

from hypaware.core.contracts import MaintainedSink
from hypaware.core.errors import StateError
from hypaware.core.schedule import next_fire
from hypaware.core.types import MaintenanceReport
from hypaware.export.fanout import ObserverFanout
from hypaware.export.runner import describe_error

if TYPE_CHECKING:
    from hypaware.cache.protocol import Cache
    from hypaware.export.runner import SinkRunner
    from hypaware.export.state import ProgressStore

__all__ = ["Maintainer"]

log = logging.getLogger("hypaware.export.driver")


class Maintainer:
    """Decides when each sink is due and runs its maintenance (see the module doc)."""

    def __init__(
        self,
        state: ProgressStore,
        cache: Cache,
        now: Callable[[], datetime],
        observe: ObserverFanout,
    ) -> None:
        self._state = state
        self._cache = cache
        self._now = now
        self._observe = observe
        # (schedule, last run) -> when the next run is due: croniter is not cheap
        # enough to ask on every pass.
        self._next: dict[tuple[str, datetime], datetime] = {}

    def schedule(self, runner: SinkRunner) -> str | None:
        sink = runner.sink
        if sink is None or not isinstance(sink, MaintainedSink):
            return None
        return sink.maintenance_schedule()

    def due(self, runner: SinkRunner) -> bool:
        schedule = self.schedule(runner)
        if schedule is None:
            return False
        try:
            last = self._state.last_maintenance(runner.name)
        except StateError:
            return False
        if last is None:
            return True
        key = (schedule, last[0])
        upcoming = self._next.get(key)
        if upcoming is None:
            self._next.clear()
            upcoming = self._next[key] = next_fire(schedule, last[0])
        return upcoming <= self._now()

    async def run(self, runner: SinkRunner) -> MaintenanceReport:
        """Maintain `runner`'s sink now (building it if need be), whatever its schedule."""
        sink = runner.build()
        if not isinstance(sink, MaintainedSink):
            return MaintenanceReport(runner.name)
        wanted = runner.spec.datasets
        datasets = [d for d in self._cache.datasets() if wanted is None or d.name in wanted]
        at = self._now()
        async with runner.busy:
            try:
                report = await sink.maintain(datasets, now=at)
            except Exception as exc:
                report = MaintenanceReport(
                    runner.name,
                    errors=(f"sink {runner.name!r}: maintenance failed: {describe_error(exc)}",),
                )
        self._record(runner.name, at, report)
        return report

    def _record(self, sink: str, at: datetime, report: MaintenanceReport) -> None:
        body: dict[str, Any] = report.as_dict()
        try:
            self._state.record_maintenance(sink, at, body)
        except StateError as exc:
            log.warning("sink %s: cannot record maintenance: %s", sink, exc)
        level = logging.WARNING if report.errors else logging.INFO
        log.log(
            level,
            "sink %s: maintenance: %s (%.2fs)",
            sink,
            report.summary(),
            report.seconds,
            extra={"sink": sink, "maintenance": body},
        )
        self._observe.maintenance_finished(sink, report)
