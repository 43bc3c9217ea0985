"""`ExportDriver`: moves sealed cache partitions into sinks, each on its own schedule.

For each sink, on each slot of its cron schedule (UTC): re-send any batch
left in flight by a crash (same id, same partitions), then per dataset take
the respooled partitions and the ready partitions past the sink's
high-water, group them into batches bounded by the sink's row and byte
limits, record each batch durably, hand it to the sink with a timeout, and
settle it in one transaction: what the sink acked advances progress, the
rest is respooled for the next slot. Every sink runs in a task of its own, so
one that raises, hangs or cannot be built delays no other.

The slots and the clock are in `hypaware.export.slots`, one pass of one sink
in `hypaware.export.passes`, and what a pass reports in
`hypaware.export.reports`.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Self

from hypaware.cache.protocol import Cache, ExportFloor, RetentionAware
from hypaware.core.config import HypawareConfig, SinkSpec
from hypaware.core.contracts import MaintainedSink
from hypaware.core.errors import CacheError, ConfigError, HypawareError, StateError
from hypaware.core.types import MaintenanceReport
from hypaware.export.fanout import ObserverFanout
from hypaware.export.ledger import ParkedPartition
from hypaware.export.maintenance import Maintainer
from hypaware.export.observer import ExportObserver, NullObserver
from hypaware.export.passes import Exporter
from hypaware.export.reports import RunReport, SinkReport
from hypaware.export.runner import SinkRunner, describe_error
from hypaware.export.slots import Clock, SystemClock, next_slot, sleep_until
from hypaware.export.start import bind, fix_start
from hypaware.export.state import ProgressStore

if TYPE_CHECKING:
    from hypaware.core.contracts import Sink
    from hypaware.core.registry import Registry
    from hypaware.core.resolver import SinkPlan

__all__ = ["ExportDriver"]

log = logging.getLogger(__name__)

# close() must return within a second: the parts of that second.
_SINK_CLOSE_WAIT = 0.4
_SETTLE_WAIT = 0.2
_CANCEL_WAIT = 0.2


class ExportDriver:
    """Exports a cache's sealed partitions to sinks on their schedules.

    Build it with `from_config` (sinks built from plugins, the cache and
    state directory from the config), or directly from a `Cache`, already
    built sinks (or zero-argument callables that build them) with their
    `SinkSpec` settings, and a state directory or `ProgressStore`.

    `run_once()` runs one pass over every sink now; `run_forever()` runs each
    sink on its schedule until `close()`. `close()` returns within about a
    second whatever the sinks are doing: it closes the sinks (which aborts
    their waits), then cancels what is left. A batch interrupted that way
    stays recorded and is re-sent, with the same id, on the next run.
    """

    def __init__(
        self,
        cache: Cache,
        sinks: Iterable[tuple[SinkSpec, Any]],
        *,
        state: ProgressStore | str | os.PathLike[str],
        observer: ExportObserver | Sequence[ExportObserver] | None = None,
        clock: Clock | None = None,
        close_sinks: bool = True,
    ) -> None:
        self.cache = cache
        self._runners: dict[str, SinkRunner] = {}
        for spec, source in sinks:
            if spec.name in self._runners:
                raise ConfigError.single(f"sinks.{spec.name}", "sink name given twice")
            self._runners[spec.name] = SinkRunner(spec, source)
        self.state = state if isinstance(state, ProgressStore) else ProgressStore(Path(state))
        if observer is None:
            observers: tuple[ExportObserver, ...] = ()
        elif isinstance(observer, Sequence):
            observers = tuple(observer)
        else:
            observers = (observer,)
        #: Every observer, called in this order.
        self.observers = observers
        #: The first observer (a `NullObserver` when none was given).
        self.observer: ExportObserver = observers[0] if observers else NullObserver()
        self.clock: Clock = clock or SystemClock()
        self._close_sinks = close_sinks
        self._stop = asyncio.Event()
        self._closed = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._observe = ObserverFanout(observers)
        self._exporter = Exporter(
            self.cache,
            self.state,
            stop=self._stop,
            locks_dir=self.state.state_dir / "locks",
            error=self._error,
            observe=self._observe,
            now=self.clock.now,
        )
        self._maintainer = Maintainer(self.state, self.cache, self.clock.now, self._observe)

    @classmethod
    def from_config(
        cls,
        config: HypawareConfig,
        *,
        cache: Cache | None = None,
        registry: Registry | None = None,
        env: Mapping[str, str] | None = None,
        observer: ExportObserver | Sequence[ExportObserver] | None = None,
        clock: Clock | None = None,
        plans: Sequence[SinkPlan] | None = None,
        state: ProgressStore | str | os.PathLike[str] | None = None,
    ) -> ExportDriver:
        """A driver for every sink of `config`.

        Resolves the config now (raising `ConfigError` with every problem),
        but builds each sink on its first pass: a sink whose plugin fails to
        build is reported on each of its slots, naming it, while the others
        export. `cache` defaults to a `LocalCache` at the config's cache path.
        `plans`, the config's plans as `hypaware.core.checks.check_config`
        returned them, spares loading the plugin registry and resolving again.
        `state` (default: the config's state directory) holds the progress
        store and every sink's own state.
        """
        from hypaware.core.registry import Registry
        from hypaware.core.resolver import resolve
        from hypaware.export.build import build

        if plans is None:
            known = Registry.from_entry_points() if registry is None else registry
            plans = resolve(config, known, env=env)
        if cache is None:
            from hypaware.cache.local import LocalCache

            cache = LocalCache.from_config(config)

        if state is None:
            state = config.state_path
        state_dir = state.state_dir if isinstance(state, ProgressStore) else Path(state)

        def factory(plan: Any) -> Callable[[], Sink]:
            return lambda: build(plan, config=config, env=env, state_dir=state_dir)

        return cls(
            cache,
            [(plan.spec, factory(plan)) for plan in plans],
            state=state,
            observer=observer,
            clock=clock,
        )

    @property
    def sink_names(self) -> tuple[str, ...]:
        return tuple(self._runners)

    def sink_spec(self, name: str) -> SinkSpec:
        return self._runners[name].spec

    def sink(self, name: str) -> Sink:
        """The live sink `name`, built now if the driver has not built it yet.

        Raises `KeyError` for a sink the driver does not run, and whatever
        building raises (`ConfigError`, `PluginError`).
        """
        return self._runners[name].build()

    # ----------------------------------------------------------------- runs

    async def run_once(
        self, *, sinks: Iterable[str] | None = None, backfill: bool = False
    ) -> RunReport:
        """One pass over every sink (or those named in `sinks`), concurrently, now.

        `backfill` also sends every sealed partition before a sink's start
        point that it has not sent (a new sink starts after what is sealed
        when a driver first sees it). Returns what each sink did; errors are
        in the report, not raised.
        """
        names = self._select(sinks)
        if self._closed:
            raise HypawareError("the export driver is closed")
        problem = self._prepare(names, backfill)
        if problem is not None:
            return RunReport({n: SinkReport(n, errors=[problem]) for n in names})
        tasks = [self._spawn(self._exporter.run_pass(self._runners[n], backfill)) for n in names]
        results = await asyncio.gather(*tasks, return_exceptions=True)
        reports: dict[str, SinkReport] = {}
        for name, result in zip(names, results, strict=True):
            if isinstance(result, SinkReport):
                reports[name] = result
            else:
                reason = "interrupted by close()" if self._stop.is_set() else repr(result)
                reports[name] = SinkReport(name, errors=[reason])
        for name in names:
            await self._maintain_if_due(self._runners[name], reports[name])
        self._retention()
        return RunReport(reports)

    async def maintain(self, *, sinks: Iterable[str] | None = None) -> dict[str, MaintenanceReport]:
        """Maintain every sink that keeps its destination healthy (`MaintainedSink`) now.

        Whatever their schedules; for each sink (or those named in `sinks`)
        that is one, the report of the run. Waits for a pass of the sink in
        progress to end. Failures are in the reports, not raised.
        """
        names = self._select(sinks)
        if self._closed:
            raise HypawareError("the export driver is closed")
        out: dict[str, MaintenanceReport] = {}
        for name in names:
            runner = self._runners[name]
            try:
                sink = runner.build()
            except Exception as exc:
                out[name] = MaintenanceReport(
                    name, errors=(f"sink {name!r} cannot be built: {describe_error(exc)}",)
                )
                continue
            if isinstance(sink, MaintainedSink):
                out[name] = await self._maintainer.run(runner)
        return out

    async def _maintain_if_due(self, runner: SinkRunner, report: SinkReport | None) -> None:
        if self._stop.is_set() or not self._maintainer.due(runner):
            return
        done = await self._maintainer.run(runner)
        if report is not None:
            report.maintenance = done.as_dict()
            report.notices.extend(f"maintenance: {e}" for e in done.errors)

    async def run_forever(
        self, *, sinks: Iterable[str] | None = None, backfill: bool = False
    ) -> None:
        """Run every sink (or those named in `sinks`) on its schedule until `close()`."""
        names = self._select(sinks)
        if self._closed:
            raise HypawareError("the export driver is closed")
        for name in names:
            self._announce(self._runners[name])
        # A failed binding is reported by each pass (the exporter stays unbound).
        self._prepare(names, backfill)
        tasks = [self._spawn(self._scheduled(self._runners[n], backfill)) for n in names]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        else:
            await self._stop.wait()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()

    async def flush(self) -> list[str]:
        """Ask every built sink that buffers (`Flushable`) to make its data durable now.

        Waits for no pass: call it between runs. Returns the errors, one per
        sink that failed (each also logged and sent to the observer).
        """
        from hypaware.core.contracts import Flushable

        errors: list[str] = []
        for runner in self._runners.values():
            if runner.sink is None or not isinstance(runner.sink, Flushable):
                continue
            try:
                await runner.sink.flush()
            except Exception as exc:
                message = f"sink {runner.name!r}: flush() failed: {describe_error(exc)}"
                errors.append(message)
                self._error(runner.name, message)
        return errors

    async def close(self) -> None:
        """Stop: flush and close the sinks (aborting their waits), cancel the rest, close the state.

        A sink that buffers (`Flushable`) is flushed just before it is closed.
        Returns within about a second and leaves no task behind. A second
        call is a no-op. ``async with ExportDriver(...) as driver:`` closes
        it on the way out.
        """
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._close_sinks:
            closers = [
                asyncio.ensure_future(self._close_sink(r)) for r in self._runners.values() if r.sink
            ]
            if closers:
                _done, pending = await asyncio.wait(closers, timeout=_SINK_CLOSE_WAIT)
                for task in pending:
                    task.cancel()
                    log.error(
                        "a sink did not close within %.1fs", _SINK_CLOSE_WAIT, extra={"sink": None}
                    )
                if pending:
                    await asyncio.wait(pending, timeout=_CANCEL_WAIT)
        if self._tasks:
            await asyncio.wait(set(self._tasks), timeout=_SETTLE_WAIT)
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            _done, stuck = await asyncio.wait(set(self._tasks), timeout=_CANCEL_WAIT)
            for _task in stuck:
                log.error("an export task ignored cancellation; it is abandoned")
        if self._exporter.binding is not None:
            self._exporter.binding.release()
        self.state.close()

    async def _close_sink(self, runner: SinkRunner) -> None:
        from hypaware.core.contracts import Flushable

        assert runner.sink is not None
        if isinstance(runner.sink, Flushable):
            try:
                await runner.sink.flush()
            except Exception as exc:
                self._error(
                    runner.name, f"sink {runner.name!r}: flush() failed: {describe_error(exc)}"
                )
        try:
            await runner.sink.close()
        except Exception as exc:
            self._error(runner.name, f"sink {runner.name!r}: close() failed: {describe_error(exc)}")

    def _spawn(self, coro: Any) -> asyncio.Task[Any]:
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return task

    def _select(self, sinks: Iterable[str] | None) -> list[str]:
        if sinks is None:
            return list(self._runners)
        names = list(dict.fromkeys(sinks))
        unknown = [n for n in names if n not in self._runners]
        if unknown:
            from hypaware.core.registry import did_you_mean

            raise ConfigError(
                [
                    ConfigError.single(
                        "sinks", f"no such sink {n!r}{did_you_mean(n, self._runners)}"
                    ).problems[0]
                    for n in unknown
                ]
            )
        return names

    # ------------------------------------------------------------- parking

    def parked(self, sink: str | None = None, dataset: str | None = None) -> list[ParkedPartition]:
        """Partitions parked after failing for good (or too often), by sink, dataset, seq.

        They stay in the cache (retention keeps them) and out of every pass
        until `unpark` puts them back in line.
        """
        if sink is not None:
            self._select([sink])
        return self.state.parked(sink, dataset)

    def unpark(
        self,
        sink: str | None = None,
        dataset: str | None = None,
        partition_ids: Iterable[str] | None = None,
    ) -> list[ParkedPartition]:
        """Put parked partitions (all, or those of `sink` / `dataset` / `partition_ids`)
        back in line: the next pass of their sink sends them, with a fresh attempt count.

        Raises `ConfigError` for a sink the driver does not run, or a dataset
        neither the cache nor the parked set knows, with a did-you-mean.
        """
        if sink is not None:
            self._select([sink])
        if dataset is not None:
            known = {d.name for d in self.cache.datasets()} | {
                p.dataset for p in self.state.parked()
            }
            if dataset not in known:
                from hypaware.core.registry import did_you_mean

                raise ConfigError.single(
                    "dataset", f"no such dataset {dataset!r}{did_you_mean(dataset, known)}"
                )
        back = self.state.unpark(sink, dataset, partition_ids)
        if back:
            log.info(
                "%d parked partitions put back in line", len(back), extra={"partitions": len(back)}
            )
        return back

    # ------------------------------------------------------------ schedule

    def _prepare(self, names: Sequence[str], backfill: bool) -> str | None:
        """Bind the cache (once per driver) and fix new sinks' starts; the error, if any."""
        try:
            if self._exporter.binding is None:
                self._exporter.binding = bind(self.cache, self.state, self._observe)
            for name in names:
                fix_start(
                    self.cache,
                    self.state,
                    self._runners[name],
                    self._observe,
                    backfill=backfill,
                    now=self.clock.now(),
                )
        except (CacheError, StateError, OSError) as exc:
            message = f"the cache cannot be bound to the progress store: {exc}"
            self._error(None, message)
            return message
        return None

    def _announce(self, runner: SinkRunner) -> None:
        """Say that `runner`'s sink is scheduled and when it runs next (UTC)."""
        schedule = runner.spec.schedule
        try:
            last = self.state.last_slot(runner.name)
            upcoming: datetime | None = next_slot(schedule, self.clock.now(), last)
        except Exception:
            upcoming = None  # _scheduled reports it
        when = "-" if upcoming is None else upcoming.strftime("%Y-%m-%dT%H:%M:%SZ")
        log.info(
            "sink %s: scheduled %r (UTC); next pass at %s",
            runner.name,
            schedule,
            when,
            extra={"sink": runner.name, "schedule": schedule, "next_slot": when},
        )
        self._observe.sink_scheduled(runner.name, schedule, upcoming)

    async def _scheduled(self, runner: SinkRunner, backfill: bool) -> None:
        schedule = runner.spec.schedule
        last: datetime | None
        try:
            last = self.state.last_slot(runner.name)
        except StateError as exc:
            self._error(runner.name, str(exc))
            last = None
        while not self._stop.is_set():
            try:
                slot = next_slot(schedule, self.clock.now(), last)
            except Exception as exc:
                self._error(
                    runner.name,
                    f"sink {runner.name!r}: schedule {schedule!r} gives no next time "
                    f"({describe_error(exc)}); this sink will not run",
                )
                return
            probe = self._halt_probe(runner.name, slot)
            if probe is not None:
                # A halted sink is tried again on its own backoff, between slots.
                if not await sleep_until(self.clock, self._stop, probe):
                    return
                await self._exporter.run_pass(runner, backfill, wait_out_halt=True)
                continue
            if not await sleep_until(self.clock, self._stop, slot):
                return
            last = slot
            try:
                if not self.state.claim_slot(runner.name, slot):
                    continue
            except StateError as exc:
                self._error(runner.name, str(exc))
                continue
            await self._exporter.run_pass(runner, backfill, wait_out_halt=True)
            await self._maintain_if_due(runner, None)
            self._retention()

    def _halt_probe(self, sink: str, slot: datetime) -> datetime | None:
        """When a halted `sink` is next tried, if that comes before its next slot."""
        try:
            halt = self.state.halted(sink)
        except StateError:
            return None
        if halt is None or halt.next_try >= slot:
            return None
        return halt.next_try

    # ----------------------------------------------------------- retention

    def floors(self) -> dict[str, ExportFloor]:
        """Per dataset, what the configured sinks still need from the cache."""
        waters = self.state.high_waters()
        parked = self.state.parked_ids()
        floors: dict[str, ExportFloor] = {}
        for info in self.cache.datasets():
            lowest: int | None = None
            pending: set[str] = set()
            kept: set[str] = set()
            for runner in self._runners.values():
                wanted = runner.spec.datasets
                if wanted is not None and info.name not in wanted:
                    continue
                # A sink that has not started on the dataset yet may still backfill it.
                water = waters.get((runner.name, info.name), 0)
                lowest = water if lowest is None else min(lowest, water)
                pending.update(e.partition_id for e in self.state.respooled(runner.name, info.name))
                held = parked.get((runner.name, info.name), set())
                pending.update(held)
                kept.update(held)
                for flight in self.state.in_flight(runner.name):
                    if flight.dataset == info.name:
                        pending.update(flight.partition_ids)
                pending.update(self._backfill_owed(runner.name, info.name))
            if lowest is not None:
                floors[info.name] = ExportFloor(lowest, frozenset(pending), frozenset(kept))
        return floors

    def _backfill_owed(self, sink: str, dataset: str) -> list[str]:
        """The partitions a begun backfill of `sink` has still to send (before its start point)."""
        point = self.state.start_point(sink, dataset)
        if point is None or not point.backfilling:
            return []
        return [
            p.id
            for p in self.cache.ready_partitions(dataset, after=point.backfill_hw)
            if p.seq <= point.backfill_to
        ]

    def _retention(self) -> None:
        if self._closed or not isinstance(self.cache, RetentionAware):
            return
        try:
            floors = self.floors()
            result = self.cache.enforce_retention(floors, now=self.clock.now())
        except (StateError, CacheError, OSError) as exc:
            self._error(None, f"cache retention skipped: {exc}")
            return
        if result.dropped:
            log.info(
                "cache retention dropped %d partitions (%d bytes)",
                len(result.dropped),
                result.bytes_freed,
                extra={"dropped": len(result.dropped), "forced": len(result.forced)},
            )

    # -------------------------------------------------------------- notify

    def _error(self, sink: str | None, message: str, report: SinkReport | None = None) -> None:
        if report is not None:
            report.errors.append(message)
        log.error("%s", message, extra={"sink": sink})
        self._observe.error(sink, message)
