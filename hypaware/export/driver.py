"""`ExportDriver`: moves sealed cache partitions into sinks, each on its own schedule.

For each sink, on each slot of its cron schedule (UTC): re-send any batch
left in flight by a crash (same id, same partitions), then per dataset take
the respooled partitions and the ready partitions past the sink's
high-water, group them into batches bounded by the sink's row and byte
limits, record each batch durably, hand it to the sink with a timeout, and
settle it in one transaction: what the sink acked advances progress, the
rest is respooled for the next slot. Every sink runs in a task of its own, so
one that raises, hangs or cannot be built delays no other.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import logging
import os
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import attrs

from hypaware.cache.protocol import Cache, ExportFloor, RetentionAware
from hypaware.core.config import HypawareConfig, SinkSpec
from hypaware.core.errors import CacheError, ConfigError, HypawareError, StateError
from hypaware.export.observer import ExportObserver, NullObserver
from hypaware.core.schedule import next_fire
from hypaware.export.state import InFlightBatch, ProgressStore
from hypaware.core.types import DatasetInfo, ExportBatch, ExportOptions, ExportResult, PartitionRef

if TYPE_CHECKING:
    from hypaware.core.contracts import Sink
    from hypaware.core.registry import Registry

__all__ = [
    "Clock",
    "ExportDriver",
    "RunReport",
    "SinkReport",
    "SystemClock",
    "group_batches",
    "next_slot",
]

log = logging.getLogger(__name__)

# close() must return within a second: the parts of that second.
_SINK_CLOSE_WAIT = 0.4
_SETTLE_WAIT = 0.2
_CANCEL_WAIT = 0.2


class Clock(Protocol):
    """Where the driver gets the time and how it waits (UTC). Inject one in tests."""

    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The wall clock and `asyncio.sleep`."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def next_slot(schedule: str, now: datetime, last: datetime | None) -> datetime:
    """The next slot of `schedule` to fire: strictly after `now` and after `last`.

    Taking the later of the two means a slot never fires twice, even when
    the clock steps back, and slots missed while a pass ran long are
    skipped rather than fired in a burst.
    """
    after = now if last is None or now > last else last
    return next_fire(schedule, after)


def group_batches(
    parts: Sequence[PartitionRef], max_rows: int, max_bytes: int
) -> list[list[PartitionRef]]:
    """Split `parts` (kept in order) into runs within `max_rows` and `max_bytes`.

    A partition larger than a limit on its own makes a batch of one.
    """
    groups: list[list[PartitionRef]] = []
    current: list[PartitionRef] = []
    rows = size = 0
    for part in parts:
        if current and (rows + part.row_count > max_rows or size + part.byte_size > max_bytes):
            groups.append(current)
            current, rows, size = [], 0, 0
        current.append(part)
        rows += part.row_count
        size += part.byte_size
    if current:
        groups.append(current)
    return groups


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


class _Runner:
    """One sink: its settings, the live sink (built on first use), and its pass lock."""

    def __init__(self, spec: SinkSpec, source: Any) -> None:
        self.spec = spec
        self.name = spec.name
        self._factory: Callable[[], Sink] | None = None
        self.sink: Sink | None = None
        if callable(source) and not hasattr(source, "export_batch"):
            self._factory = source
        else:
            self.sink = source
        self.busy = asyncio.Lock()

    def build(self) -> Sink:
        if self.sink is None:
            assert self._factory is not None
            self.sink = self._factory()
        return self.sink


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
        observer: ExportObserver | None = None,
        clock: Clock | None = None,
        close_sinks: bool = True,
    ) -> None:
        self.cache = cache
        self._runners: dict[str, _Runner] = {}
        for spec, source in sinks:
            if spec.name in self._runners:
                raise ConfigError.single(f"sinks.{spec.name}", "sink name given twice")
            self._runners[spec.name] = _Runner(spec, source)
        self.state = state if isinstance(state, ProgressStore) else ProgressStore(Path(state))
        self.observer: ExportObserver = observer or NullObserver()
        self.clock: Clock = clock or SystemClock()
        self._close_sinks = close_sinks
        self._stop = asyncio.Event()
        self._closed = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._locks_dir = self.state.state_dir / "locks"

    @classmethod
    def from_config(
        cls,
        config: HypawareConfig,
        *,
        cache: Cache | None = None,
        registry: Registry | None = None,
        env: Mapping[str, str] | None = None,
        observer: ExportObserver | None = None,
        clock: Clock | None = None,
    ) -> ExportDriver:
        """A driver for every sink of `config`.

        Resolves the config now (raising `ConfigError` with every problem),
        but builds each sink on its first pass: a sink whose plugin fails to
        build is reported on each of its slots, naming it, while the others
        export. `cache` defaults to a `LocalCache` at the config's cache path.
        """
        from hypaware.core.registry import Registry
        from hypaware.core.resolver import build, resolve

        plans = resolve(config, registry if registry is not None else Registry.from_entry_points())
        if cache is None:
            from hypaware.cache.local import LocalCache

            cache = LocalCache.from_config(config)

        def factory(plan: Any) -> Callable[[], Sink]:
            return lambda: build(plan, config=config, env=env)

        return cls(
            cache,
            [(plan.spec, factory(plan)) for plan in plans],
            state=config.state_path,
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

        `backfill` makes a sink that has never seen a dataset start from its
        first partition instead of from the partitions sealed after now.
        Returns what each sink did; errors are in the report, not raised.
        """
        names = self._select(sinks)
        if self._closed:
            raise HypawareError("the export driver is closed")
        tasks = [self._spawn(self._pass(self._runners[n], backfill)) for n in names]
        results = await asyncio.gather(*tasks, return_exceptions=True)
        reports: dict[str, SinkReport] = {}
        for name, result in zip(names, results, strict=True):
            if isinstance(result, SinkReport):
                reports[name] = result
            else:
                reason = "interrupted by close()" if self._stop.is_set() else repr(result)
                reports[name] = SinkReport(name, errors=[reason])
        self._retention()
        return RunReport(reports)

    async def run_forever(
        self, *, sinks: Iterable[str] | None = None, backfill: bool = False
    ) -> None:
        """Run every sink (or those named in `sinks`) on its schedule until `close()`."""
        names = self._select(sinks)
        if self._closed:
            raise HypawareError("the export driver is closed")
        log.info(
            "export driver running %d sinks on their schedules: %s",
            len(names),
            ", ".join(f"{n} ({self._runners[n].spec.schedule})" for n in names),
            extra={"sinks": names},
        )
        tasks = [self._spawn(self._scheduled(self._runners[n], backfill)) for n in names]
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
        else:
            await self._stop.wait()

    async def close(self) -> None:
        """Stop: close the sinks (aborting their waits), cancel what is left, close the state.

        Returns within about a second and leaves no task behind. A second
        call is a no-op.
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
        self.state.close()

    async def _close_sink(self, runner: _Runner) -> None:
        assert runner.sink is not None
        try:
            await runner.sink.close()
        except Exception as exc:
            self._error(runner.name, f"sink {runner.name!r}: close() failed: {_describe(exc)}")

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
                        f"sinks.{n}", f"no such sink{did_you_mean(n, self._runners)}"
                    ).problems[0]
                    for n in unknown
                ]
            )
        return names

    # ------------------------------------------------------------ schedule

    async def _scheduled(self, runner: _Runner, backfill: bool) -> None:
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
                    f"({_describe(exc)}); this sink will not run",
                )
                return
            if not await self._sleep_until(slot):
                return
            last = slot
            try:
                if not self.state.claim_slot(runner.name, slot):
                    continue
            except StateError as exc:
                self._error(runner.name, str(exc))
                continue
            await self._pass(runner, backfill)
            self._retention()

    async def _sleep_until(self, when: datetime) -> bool:
        """Wait until `when` by the clock; False if the driver stops first."""
        stop = asyncio.ensure_future(self._stop.wait())
        try:
            while True:
                delay = (when - self.clock.now()).total_seconds()
                if delay <= 0:
                    return not self._stop.is_set()
                # Wake up at least every minute so a wall-clock jump is noticed.
                nap = asyncio.ensure_future(self.clock.sleep(min(delay, 60.0)))
                try:
                    await asyncio.wait({nap, stop}, return_when=asyncio.FIRST_COMPLETED)
                finally:
                    if not nap.done():
                        nap.cancel()
                        with contextlib.suppress(asyncio.CancelledError):
                            await nap
                if self._stop.is_set():
                    return False
        finally:
            stop.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await stop

    # ---------------------------------------------------------------- pass

    async def _pass(self, runner: _Runner, backfill: bool) -> SinkReport:
        report = SinkReport(runner.name)
        started = time.monotonic()
        async with runner.busy:
            lock = self._acquire(runner.name, report)
            if lock is None:
                return report
            try:
                await self._pass_locked(runner, backfill, report)
            except StateError as exc:
                self._error(runner.name, str(exc), report)
            finally:
                os.close(lock)
        report.seconds = time.monotonic() - started
        error = "; ".join(report.errors) if report.errors else None
        with contextlib.suppress(StateError):
            self.state.record_run(runner.name, error=error)
        log.info(
            "sink %s: exported %d partitions (%d rows) in %d batches, %d to retry",
            runner.name,
            report.partitions,
            report.rows,
            report.batches,
            report.retried,
            extra={
                "sink": runner.name,
                "partitions": report.partitions,
                "rows": report.rows,
                "bytes": report.bytes,
                "retried": report.retried,
            },
        )
        return report

    def _acquire(self, sink: str, report: SinkReport) -> int | None:
        """An exclusive lock on `sink` across processes, so two exports never overlap."""
        try:
            self._locks_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self._locks_dir / f"{sink}.lock", os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            self._error(sink, f"sink {sink!r}: cannot create its lock file: {exc}", report)
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            self._error(sink, f"sink {sink!r} is being exported by another process", report)
            return None
        return fd

    async def _pass_locked(self, runner: _Runner, backfill: bool, report: SinkReport) -> None:
        try:
            sink = runner.build()
        except Exception as exc:
            text = str(exc) if isinstance(exc, HypawareError) else _describe(exc)
            if runner.name not in text:
                text = f"sink {runner.name!r} cannot be built: {text}"
            self._error(runner.name, text, report)
            return
        try:
            infos = {d.name: d for d in self.cache.datasets()}
        except (CacheError, OSError) as exc:
            self._error(runner.name, f"cache cannot be read: {exc}", report)
            return
        wanted = runner.spec.datasets
        if wanted is not None:
            missing = [d for d in wanted if d not in infos]
            if missing:
                log.info(
                    "sink %s: datasets %s are not in the cache yet",
                    runner.name,
                    ", ".join(missing),
                    extra={"sink": runner.name},
                )
            infos = {n: i for n, i in infos.items() if n in wanted}

        held: set[tuple[str, str]] = set()
        for flight in self.state.in_flight(runner.name):
            if self._stop.is_set():
                return
            held.update((flight.dataset, p) for p in flight.partition_ids)
            info = infos.get(flight.dataset)
            if info is None:
                continue
            refs = self._resolve(runner.name, info, flight.partition_ids, report)
            await self._send(runner, sink, info, flight, refs, report)
            held.difference_update((flight.dataset, p) for p in flight.partition_ids)

        for info in infos.values():
            if self._stop.is_set():
                return
            try:
                await self._export_dataset(runner, sink, info, backfill, held, report)
            except (CacheError, OSError) as exc:
                self._error(runner.name, f"dataset {info.name!r}: {exc}", report)

    async def _export_dataset(
        self,
        runner: _Runner,
        sink: Sink,
        info: DatasetInfo,
        backfill: bool,
        held: set[tuple[str, str]],
        report: SinkReport,
    ) -> None:
        name = runner.name
        high_water = self.state.high_water(name, info.name)
        if high_water is None:
            start = 0
            if not backfill:
                start = max((p.seq for p in self.cache.ready_partitions(info.name)), default=0)
            high_water = self.state.start(name, info.name, start)
            log.info(
                "sink %s starts dataset %s at seq %d (%s)",
                name,
                info.name,
                high_water,
                "backfill" if backfill else "future partitions only",
                extra={"sink": name, "dataset": info.name, "high_water": high_water},
            )
        respooled = [e.partition_id for e in self.state.respooled(name, info.name)]
        retry_refs = self._resolve(name, info, respooled, report, forget=True)
        fresh = self.cache.ready_partitions(info.name, after=high_water)
        skip = {p.id for p in retry_refs} | {p for d, p in held if d == info.name}
        parts = retry_refs + [p for p in fresh if p.id not in skip]
        spec = runner.spec
        for group in group_batches(parts, spec.max_batch_rows, spec.max_batch_bytes):
            if self._stop.is_set():
                return
            batch_id = f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:16]}"
            flight = self.state.begin_batch(
                batch_id, name, info.name, [(p.id, p.seq) for p in group]
            )
            await self._send(runner, sink, info, flight, group, report)
        self._report_lag(name, info, report)

    def _resolve(
        self,
        sink: str,
        info: DatasetInfo,
        ids: Sequence[str],
        report: SinkReport,
        *,
        forget: bool = False,
    ) -> list[PartitionRef]:
        refs: list[PartitionRef] = []
        gone: list[str] = []
        for pid in ids:
            ref = self.cache.partition(info.name, pid)
            if ref is None:
                gone.append(pid)
            else:
                refs.append(ref)
        if gone:
            report.lost += len(gone)
            log.warning(
                "sink %s: %d partitions of %s are gone from the cache before being exported "
                "(dropped by a hard retention cap): %s",
                sink,
                len(gone),
                info.name,
                ", ".join(gone),
                extra={"sink": sink, "dataset": info.name, "partitions": gone},
            )
            self._notify("partitions_lost", sink, info.name, gone)
            if forget:
                self.state.forget_respooled(sink, info.name, gone)
        return refs

    async def _send(
        self,
        runner: _Runner,
        sink: Sink,
        info: DatasetInfo,
        flight: InFlightBatch,
        refs: Sequence[PartitionRef],
        report: SinkReport,
    ) -> None:
        name = runner.name
        if not refs:
            # Everything it held is gone from the cache: settle it so progress moves on.
            self.state.settle_batch(flight, (), ())
            return
        batch = ExportBatch(flight.batch_id, name, info, refs)
        attempt = self.state.attempt(flight.batch_id)
        timeout = runner.spec.export_timeout
        started = time.monotonic()
        try:
            raw = await asyncio.wait_for(
                sink.export_batch(batch, ExportOptions(attempt=attempt, timeout=timeout)),
                timeout,
            )
            if not isinstance(raw, ExportResult):
                raise TypeError(f"export_batch returned a {type(raw).__name__}, not ExportResult")
            result = raw.reconcile(batch)
        except TimeoutError:
            message = f"sink {name!r}: batch {flight.batch_id} timed out after {timeout:g}s"
            self._error(name, message, report)
            result = ExportResult.failed(batch, f"timed out after {timeout:g}s")
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            message = (
                f"sink {name!r}: export_batch raised (a sink must report failures in its "
                f"result): {_describe(exc)}"
            )
            self._error(name, message, report)
            result = ExportResult.failed(batch, _describe(exc))
        seconds = time.monotonic() - started
        by_id = {p.id: p for p in refs}
        rows = sum(by_id[p].row_count for p in result.exported)
        self.state.settle_batch(
            flight, result.exported, result.retry_partitions, rows_exported=rows
        )
        report.batches += 1
        report.partitions += len(result.exported)
        report.rows += rows
        report.bytes += result.bytes_written
        report.files += result.files_written
        report.retried += len(result.retry_partitions)
        log.info(
            "sink %s: batch %s of %s: %d exported, %d to retry",
            name,
            flight.batch_id,
            info.name,
            len(result.exported),
            len(result.retry_partitions),
            extra={
                "sink": name,
                "dataset": info.name,
                "batch_id": flight.batch_id,
                "attempt": attempt,
                "exported": len(result.exported),
                "retry": len(result.retry_partitions),
                "rows": rows,
                "bytes": result.bytes_written,
            },
        )
        self._notify(
            "batch_exported",
            name,
            info.name,
            batch_id=flight.batch_id,
            partitions=len(result.exported),
            rows=rows,
            bytes=result.bytes_written,
            files=result.files_written,
            seconds=seconds,
        )
        if result.retry_partitions:
            for r in result.retry_partitions:
                log.warning(
                    "sink %s: partition %s/%s respooled: %s",
                    name,
                    info.name,
                    r.partition_id,
                    r.reason,
                    extra={
                        "sink": name,
                        "dataset": info.name,
                        "partition": r.partition_id,
                        "retryable": r.retryable,
                    },
                )
            self._notify(
                "partitions_retried",
                name,
                info.name,
                [r.partition_id for r in result.retry_partitions],
                [r.reason for r in result.retry_partitions],
            )

    def _report_lag(self, sink: str, info: DatasetInfo, report: SinkReport) -> None:
        high_water = self.state.high_water(sink, info.name) or 0
        behind = list(self.cache.ready_partitions(info.name, after=high_water))
        respooled = self.state.respooled(sink, info.name)
        refs = [self.cache.partition(info.name, e.partition_id) for e in respooled]
        partitions = len(behind) + len(respooled)
        rows = sum(p.row_count for p in behind) + sum(r.row_count for r in refs if r)
        report.lag_partitions += partitions
        report.lag_rows += rows
        self._notify("lag", sink, info.name, partitions=partitions, rows=rows)

    # ----------------------------------------------------------- retention

    def floors(self) -> dict[str, ExportFloor]:
        """Per dataset, what the configured sinks still need from the cache."""
        waters = self.state.high_waters()
        floors: dict[str, ExportFloor] = {}
        for info in self.cache.datasets():
            lowest: int | None = None
            pending: set[str] = set()
            for runner in self._runners.values():
                wanted = runner.spec.datasets
                if wanted is not None and info.name not in wanted:
                    continue
                # A sink that has not started on the dataset yet may still backfill it.
                water = waters.get((runner.name, info.name), 0)
                lowest = water if lowest is None else min(lowest, water)
                pending.update(e.partition_id for e in self.state.respooled(runner.name, info.name))
                for flight in self.state.in_flight(runner.name):
                    if flight.dataset == info.name:
                        pending.update(flight.partition_ids)
            if lowest is not None:
                floors[info.name] = ExportFloor(lowest, frozenset(pending))
        return floors

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
        self._notify("error", sink, message)

    def _notify(self, method: str, *args: Any, **kwargs: Any) -> None:
        try:
            getattr(self.observer, method)(*args, **kwargs)
        except Exception:
            log.exception("observer %r failed in %s", self.observer, method)


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
