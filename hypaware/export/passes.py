"""One export pass of one sink: from the cache's ready partitions to settled batches.

A pass re-sends any batch left in flight by a crash (same id, same
partitions), then per dataset takes, with a backfill, the partitions before
the sink's start point it has not sent, then the respooled partitions and
the ready partitions past the sink's high-water, groups them into batches bounded by
the sink's row and byte limits, records each batch durably, hands it to the
sink with a timeout, and settles it in one transaction: what the sink acked
advances progress, the rest is respooled for the next slot.
"""

from __future__ import annotations

import asyncio
import bisect
import contextlib
import fcntl
import functools
import logging
import os
import time
import uuid
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from hypaware.cache.protocol import Cache
from hypaware.core.errors import CacheError, HypawareError, StateError
from hypaware.core.types import (
    DatasetInfo,
    ExportBatch,
    ExportOptions,
    ExportResult,
    PartitionRef,
    RequestEvent,
)
from hypaware.export.accounts import dataset_ledger
from hypaware.export.fanout import ObserverFanout
from hypaware.export.identity import check_sink
from hypaware.export.reports import Failure, SinkReport, summarise
from hypaware.export.runner import SinkRunner, call_on_loop, describe_error, group_batches
from hypaware.export.start import Binding, fix_start
from hypaware.export.state import InFlightBatch, ProgressStore

if TYPE_CHECKING:
    from hypaware.core.contracts import Sink

__all__ = ["Exporter"]

# The driver's logger: users filter on its name (docs/export.md).
log = logging.getLogger("hypaware.export.driver")


@attrs.frozen
class BatchOutcome:
    """What came of handing one batch to its sink."""

    result: ExportResult  # reconciled with the batch: every partition accounted for
    seconds: float
    # The failure was already logged as an error (a timeout, a sink that raised).
    logged: bool


class Exporter:
    """Runs export passes for the sinks of one driver, against its cache and progress.

    `error(sink, message, report)` is how the driver logs errors, and
    `observe` tells its observers; `stop` is set when the
    driver closes, and a pass then stops between batches. `binding` is set by
    the driver (`hypaware.export.start.bind`) before the first pass.
    """

    def __init__(
        self,
        cache: Cache,
        state: ProgressStore,
        *,
        stop: asyncio.Event,
        locks_dir: Path,
        error: Callable[[str | None, str, SinkReport | None], None],
        observe: ObserverFanout,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self.cache = cache
        self.state = state
        self._stop = stop
        self._locks_dir = locks_dir
        self._error = error
        self._observe = observe
        self._now = now or functools.partial(datetime.now, UTC)
        self.binding: Binding | None = None

    async def run_pass(
        self, runner: SinkRunner, backfill: bool, *, wait_out_halt: bool = False
    ) -> SinkReport:
        """One pass of `runner`'s sink, under its pass lock and its lock file.

        A halted sink is tried at once, unless `wait_out_halt` (a scheduled
        pass) and its next try is still to come: the pass then reports the
        halt and sends nothing.
        """
        report = SinkReport(runner.name)
        started = time.monotonic()
        self._observe.pass_started(runner.name)
        async with runner.busy:
            if self.binding is None:
                self._error(runner.name, "the export driver has not bound its cache", report)
            elif wait_out_halt and self._waiting_out_halt(runner.name, report):
                pass
            elif self._checked(runner, backfill, report):
                report.notices.extend(self.binding.notices())
                lock = self._acquire(runner.name, report)
                if lock is not None:
                    try:
                        await self._pass_locked(runner, backfill, report)
                    except StateError as exc:
                        self._error(runner.name, str(exc), report)
                    finally:
                        os.close(lock)
        self._held_back(runner.name, report)
        report.seconds = time.monotonic() - started
        error = "; ".join(report.errors) if report.errors else None
        with contextlib.suppress(StateError):
            self.state.record_run(runner.name, error=error)
            self.state.record_health(runner.name, error, report.failed_partitions)
        log.info(
            "sink %s: exported %d partitions (%d rows) in %d batches, %d to retry, %d parked, "
            "%d errors",
            runner.name,
            report.partitions,
            report.rows,
            report.batches,
            report.retried,
            report.parked,
            len(report.errors),
            extra={
                "sink": runner.name,
                "partitions": report.partitions,
                "rows": report.rows,
                "bytes": report.bytes,
                "retried": report.retried,
                "parked": report.parked,
                "errors": len(report.errors),
            },
        )
        self._observe.pass_finished(runner.name, report)
        return report

    def _waiting_out_halt(self, sink: str, report: SinkReport) -> bool:
        """Whether `sink` is halted and its next try has not come yet."""
        halt = self.state.halted(sink)
        if halt is None or halt.next_try <= self._now():
            return False
        log.info(
            "sink %s: halted since %s (%d tries): %s; next try at %s",
            sink,
            halt.since.isoformat(timespec="seconds"),
            halt.attempts,
            halt.reason,
            halt.next_try.isoformat(timespec="seconds"),
            extra={"sink": sink, "halted_since": halt.since.isoformat()},
        )
        return True

    def _held_back(self, sink: str, report: SinkReport) -> None:
        """Put what keeps rows from flowing in the report: a halt, parked partitions."""
        with contextlib.suppress(StateError):
            halt = self.state.halted(sink)
            report.halted = None if halt is None else halt.as_dict()
            if halt is not None and not report.failures:
                # A halt this pass began is in its failures already.
                report.errors.append(
                    f"sink {sink!r} is halted since {halt.since.isoformat(timespec='seconds')} "
                    f"({halt.attempts} tries): {halt.reason}; nothing is parked, its rows wait "
                    f"pending, and it is tried again at "
                    f"{halt.next_try.isoformat(timespec='seconds')} (at once by export --once)"
                )
            report.parked_total = len(self.state.parked(sink))
            if report.parked_total and not report.parked:
                report.errors.append(
                    f"{report.parked_total} partitions of sink {sink!r} are parked; "
                    "`hypaware retry` sends them again once their cause is fixed"
                )

    def _checked(self, runner: SinkRunner, backfill: bool, report: SinkReport) -> bool:
        """Whether the sink's recorded identity and progress let this pass run."""
        try:
            check = check_sink(
                self.state, runner.spec, backfill=backfill, built=runner.sink is not None
            )
        except (StateError, OSError) as exc:
            self._error(runner.name, f"sink {runner.name!r}: {exc}", report)
            return False
        if check.error is not None:
            self._error(runner.name, check.error, report)
            return False
        return True

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

    async def _pass_locked(self, runner: SinkRunner, backfill: bool, report: SinkReport) -> None:
        try:
            fix_start(
                self.cache, self.state, runner, self._observe, backfill=backfill, now=self._now()
            )
        except (CacheError, OSError) as exc:
            self._error(runner.name, f"cache cannot be read: {exc}", report)
            return
        try:
            sink = runner.build()
        except Exception as exc:
            text = str(exc) if isinstance(exc, HypawareError) else describe_error(exc)
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
            if self._stop.is_set() or report.halted is not None:
                return
            held.update((flight.dataset, p) for p in flight.partition_ids)
            info = infos.get(flight.dataset)
            if info is None:
                continue
            refs = self._resolve(runner.name, info, flight.partition_ids, report)
            await self._send(runner, sink, info, flight, refs, report)
            held.difference_update((flight.dataset, p) for p in flight.partition_ids)

        for info in infos.values():
            if self._stop.is_set() or report.halted is not None:
                return
            try:
                await self._export_dataset(runner, sink, info, backfill, held, report)
            except (CacheError, OSError) as exc:
                self._error(runner.name, f"dataset {info.name!r}: {exc}", report)

    async def _export_dataset(
        self,
        runner: SinkRunner,
        sink: Sink,
        info: DatasetInfo,
        backfill: bool,
        held: set[tuple[str, str]],
        report: SinkReport,
    ) -> None:
        name = runner.name
        high_water = self.state.high_water(name, info.name)
        if high_water is None:
            # The sink was seen before this dataset existed: all of it is new.
            high_water = self.state.start(name, info.name, 0, self._now())
            log.info(
                "sink %s starts dataset %s at its beginning",
                name,
                info.name,
                extra={"sink": name, "dataset": info.name, "start_seq": 0},
            )
        respooled = [e.partition_id for e in self.state.respooled(name, info.name)]
        retry_refs = self._resolve(name, info, respooled, report, forget=True)
        skip = {p.id for p in retry_refs} | {p for d, p in held if d == info.name}
        if backfill:
            await self._backfill(runner, sink, info, skip, report)
        # One listing serves the pass: what it sends, and its lag and ledger after.
        sealed = self.cache.ready_partitions(info.name)
        fresh = sealed[bisect.bisect_right(sealed, high_water, key=_seq) :]
        parts = retry_refs + [p for p in fresh if p.id not in skip]
        sent = self.state.sent_seq(name, info.name)
        await self._send_groups(runner, sink, info, parts, report, backfill=False, sent_before=sent)
        self._report_lag(name, info, sealed, report)
        # A driver's store is bound to its cache: nothing in it is another's.
        ledger = dataset_ledger(
            self.cache, self.state, name, info.name, replaced=False, sealed=sealed
        )
        report.ledger[info.name] = ledger.as_dict()

    async def _backfill(
        self,
        runner: SinkRunner,
        sink: Sink,
        info: DatasetInfo,
        skip: set[str],
        report: SinkReport,
    ) -> None:
        """Send the partitions before the start point that no backfill has sent, oldest first."""
        point = self.state.start_point(runner.name, info.name)
        if point is None or not point.pending_backfill:
            return
        skip = skip | {p.partition_id for p in self.state.parked(runner.name, info.name)}
        before = [
            p
            for p in self.cache.ready_partitions(info.name, after=point.backfill_hw)
            if p.seq <= point.start_seq and p.id not in skip
        ]
        log.info(
            "sink %s: dataset %s: backfilling %d partitions (%d rows) sealed before its start",
            runner.name,
            info.name,
            len(before),
            sum(p.row_count for p in before),
            extra={"sink": runner.name, "dataset": info.name, "partitions": len(before)},
        )
        # Recorded before the first batch: if this pass is cut short, retention
        # keeps what it has not sent for the next backfill.
        self.state.begin_backfill(runner.name, info.name)
        # What this store never sent but the sink holds was written by another
        # store of this cache identity: said, as on a normal pass.
        sent = self.state.sent_seq(runner.name, info.name)
        await self._send_groups(runner, sink, info, before, report, backfill=True, sent_before=sent)
        # A pass cut short (closing, or the sink halted) has not sent the rest.
        if not self._stop.is_set() and report.halted is None:
            # Also when nothing was left to send (all parked, or gone): the backfill is done.
            self.state.advance_backfill(runner.name, info.name, point.start_seq)

    async def _send_groups(
        self,
        runner: SinkRunner,
        sink: Sink,
        info: DatasetInfo,
        parts: Sequence[PartitionRef],
        report: SinkReport,
        *,
        backfill: bool,
        sent_before: int | None = None,
    ) -> None:
        spec = runner.spec
        for group in group_batches(parts, spec.max_batch_rows, spec.max_batch_bytes):
            if self._stop.is_set() or report.halted is not None:
                return
            batch_id = f"{datetime.now(UTC):%Y%m%dT%H%M%S}-{uuid.uuid4().hex[:16]}"
            flight = self.state.begin_batch(
                batch_id, runner.name, info.name, [(p.id, p.seq) for p in group]
            )
            await self._send(
                runner,
                sink,
                info,
                flight,
                group,
                report,
                backfill=backfill,
                sent_before=sent_before,
            )

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
            self._observe.partitions_lost(sink, info.name, gone)
            if forget:
                self.state.forget_respooled(sink, info.name, gone)
        return refs

    async def _send(
        self,
        runner: SinkRunner,
        sink: Sink,
        info: DatasetInfo,
        flight: InFlightBatch,
        refs: Sequence[PartitionRef],
        report: SinkReport,
        *,
        backfill: bool = False,
        sent_before: int | None = None,
    ) -> None:
        """Hand one recorded batch to the sink and settle what it says.

        `sent_before` is the highest seq this store had handed to the sink
        before the pass (None for batches that may hold partitions sent
        before: in flight, backfills): a partition above it that the sink
        already held was written under this cache's identity by someone else.
        """
        name = runner.name
        if not refs:
            # Everything it held is gone from the cache: settle it so progress moves on.
            self.state.settle_batch(flight, (), (), backfill=backfill)
            return
        identity = self.binding.identity if self.binding is not None else ""
        batch = ExportBatch(flight.batch_id, name, info, refs, cache_identity=identity)
        opts = self._options(runner, info, flight)
        self._observe.batch_started(name, info.name, batch_id=flight.batch_id, partitions=len(refs))
        outcome = await self._call_sink(name, sink, batch, opts, report)
        result = outcome.result
        rows = self._settle(name, info, flight, batch, opts, outcome, report, backfill=backfill)
        if sent_before is not None and result.already_held:
            by_id = {p.id: p for p in refs}
            foreign = [p for p in result.already_held if by_id[p].seq > sent_before]
            if foreign:
                self._foreign_held(name, info, identity, foreign, report)
        if result.retry_partitions:
            self._failed(runner, info, flight.batch_id, result, report, logged=outcome.logged)
        self._judge_halt(name, result, report)
        self._observe.batch_exported(
            name,
            info.name,
            batch_id=flight.batch_id,
            partitions=len(result.exported),
            rows=rows,
            bytes=result.bytes_written,
            files=result.files_written,
            seconds=outcome.seconds,
        )

    def _options(
        self, runner: SinkRunner, info: DatasetInfo, flight: InFlightBatch
    ) -> ExportOptions:
        """The batch's options: its attempt, its timeout, and callbacks to the observers."""
        name, batch_id = runner.name, flight.batch_id
        loop = asyncio.get_running_loop()
        observe = self._observe

        # Sinks call these from any thread; observers are called on the driver's loop.
        def on_retry_wait(seconds: float, cause: str) -> None:
            call_on_loop(
                loop,
                functools.partial(
                    observe.retry_wait,
                    name,
                    info.name,
                    batch_id=batch_id,
                    seconds=seconds,
                    cause=cause,
                ),
            )

        def on_request(event: RequestEvent) -> None:
            call_on_loop(
                loop,
                functools.partial(
                    observe.request_finished, name, info.name, batch_id=batch_id, event=event
                ),
            )

        return ExportOptions(
            attempt=self.state.attempt(batch_id),
            timeout=runner.spec.export_timeout,
            on_retry_wait=on_retry_wait,
            on_request=on_request,
        )

    async def _call_sink(
        self, name: str, sink: Sink, batch: ExportBatch, opts: ExportOptions, report: SinkReport
    ) -> BatchOutcome:
        """What the sink made of `batch`: its result, reconciled, or the failure it hit."""
        timeout = opts.timeout
        started = time.monotonic()
        try:
            raw = await asyncio.wait_for(sink.export_batch(batch, opts), timeout)
            if not isinstance(raw, ExportResult):
                raise TypeError(f"export_batch returned a {type(raw).__name__}, not ExportResult")
            result, logged = raw.reconcile(batch), False
        except TimeoutError:
            message = f"sink {name!r}: batch {batch.batch_id} timed out after {timeout:g}s"
            self._error(name, message, report)
            result, logged = ExportResult.failed(batch, f"timed out after {timeout:g}s"), True
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            message = (
                f"sink {name!r}: export_batch raised (a sink must report failures in its "
                f"result): {describe_error(exc)}"
            )
            self._error(name, message, report)
            result, logged = ExportResult.failed(batch, describe_error(exc)), True
        return BatchOutcome(result, time.monotonic() - started, logged)

    def _settle(
        self,
        name: str,
        info: DatasetInfo,
        flight: InFlightBatch,
        batch: ExportBatch,
        opts: ExportOptions,
        outcome: BatchOutcome,
        report: SinkReport,
        *,
        backfill: bool,
    ) -> int:
        """Record the outcome in the progress store and the report, log its line; rows exported."""
        result = outcome.result
        by_id = {p.id: p for p in batch.partitions}
        exported = {p: by_id[p].row_count for p in result.exported}
        rows = sum(exported.values())
        self.state.settle_batch(
            flight, result.exported, result.retry_partitions, rows_exported=rows, backfill=backfill
        )
        report.batches += 1
        report.add_exported(info.name, exported)
        report.bytes += result.bytes_written
        report.files += result.files_written
        report.retried += len(result.retry_partitions)
        report.already_held += len(result.already_held)
        log.info(
            "sink %s: batch %s of %s: %d exported (%d already held under cache %s), %d to retry",
            name,
            flight.batch_id,
            info.name,
            len(result.exported),
            len(result.already_held),
            batch.cache_identity,
            len(result.retry_partitions),
            extra={
                "sink": name,
                "dataset": info.name,
                "batch_id": flight.batch_id,
                "attempt": opts.attempt,
                "exported": len(result.exported),
                "retry": len(result.retry_partitions),
                "already_held": len(result.already_held),
                "cache_identity": batch.cache_identity,
                "rows": rows,
                "bytes": result.bytes_written,
            },
        )
        return rows

    def _judge_halt(self, name: str, result: ExportResult, report: SinkReport) -> None:
        """Halt the sink on a failure of its own, end its halt once it exports again."""
        fault = next((r for r in result.retry_partitions if r.sink_fault), None)
        if fault is not None:
            now = self._now()
            halt = self.state.halt(name, fault.reason, now)
            report.halted = halt.as_dict()
            # The failure itself was the batch's WARNING; this says what follows.
            log.info(
                "sink %s: halted (try %d since %s): %s; nothing is parked, its rows wait "
                "pending; next try in %.0f s",
                name,
                halt.attempts,
                halt.since.isoformat(timespec="seconds"),
                fault.reason,
                (halt.next_try - now).total_seconds(),
                extra={
                    "sink": name,
                    "halted_since": halt.since.isoformat(),
                    "attempts": halt.attempts,
                    "next_try": halt.next_try.isoformat(),
                },
            )
            self._observe.sink_halted(name, fault.reason, halt.since, halt.next_try)
        elif result.exported:
            ended = self.state.resume(name)
            if ended is not None:
                log.info(
                    "sink %s: exporting again after a halt since %s (%d tries): %s",
                    name,
                    ended.since.isoformat(timespec="seconds"),
                    ended.attempts,
                    ended.reason,
                    extra={"sink": name, "halted_since": ended.since.isoformat()},
                )
                self._observe.sink_resumed(name, ended.since, ended.attempts)

    def _foreign_held(
        self, name: str, info: DatasetInfo, identity: str, ids: Sequence[str], report: SinkReport
    ) -> None:
        """Say that partitions this store never sent were found written under its identity."""
        shown = ", ".join(sorted(ids)[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        message = (
            f"sink {name!r}: dataset {info.name!r}: {len(ids)} partitions this progress store "
            f"never sent were already written under cache identity {identity} ({shown}) and "
            "were acknowledged without being written: another state directory exports this "
            "cache to this destination, another cache with this identity (a copied or restored "
            "cache directory) does, or an earlier progress store of this cache was lost. If "
            "this cache is a copy, its rows in those "
            "partitions are not at the sink: see docs/export.md, A copied cache"
        )
        log.warning(
            "%s",
            message,
            extra={
                "sink": name,
                "dataset": info.name,
                "cache_identity": identity,
                "partitions": sorted(ids),
            },
        )
        report.notices.append(message)
        self._observe.error(name, message)

    def _failed(
        self,
        runner: SinkRunner,
        info: DatasetInfo,
        batch_id: str,
        result: ExportResult,
        report: SinkReport,
        *,
        logged: bool,
    ) -> None:
        """Park what cannot be helped by another slot; one WARNING per reason, not per partition."""
        name = runner.name
        parked = {
            p.partition_id
            for p in self.state.park_exhausted(name, info.name, runner.spec.max_partition_attempts)
        }
        failures = summarise(info.name, result.retry_partitions)
        for failure in failures:
            failure.parked = sum(
                1
                for r in result.retry_partitions
                if r.partition_id in parked
                and (r.reason, r.retryable, r.sink_fault)
                == (failure.reason, failure.retryable, failure.sink_fault)
            )
            if not logged:
                _warn(name, info, batch_id, failure)
        report.parked += len(parked)
        report.add_failures(failures)
        if not logged:  # a sink that raised was reported as an error already
            for failure in failures:
                self._observe.error(name, failure.describe())
        self._observe.partitions_retried(
            name,
            info.name,
            [r.partition_id for r in result.retry_partitions],
            [r.reason for r in result.retry_partitions],
        )
        if parked:
            parked_now = [r for r in result.retry_partitions if r.partition_id in parked]
            self._observe.partitions_parked(
                name,
                info.name,
                [r.partition_id for r in parked_now],
                [r.reason for r in parked_now],
            )

    def _report_lag(
        self, sink: str, info: DatasetInfo, sealed: Sequence[PartitionRef], report: SinkReport
    ) -> None:
        """The partitions of the pass's listing `sealed` the sink has not exported yet."""
        high_water = self.state.high_water(sink, info.name) or 0
        behind = sealed[bisect.bisect_right(sealed, high_water, key=_seq) :]
        waiting = [e.partition_id for e in self.state.respooled(sink, info.name)]
        waiting += [p.partition_id for p in self.state.parked(sink, info.name)]
        refs = [self.cache.partition(info.name, pid) for pid in waiting]
        partitions = len(behind) + len(waiting)
        rows = sum(p.row_count for p in behind) + sum(r.row_count for r in refs if r)
        report.lag_partitions += partitions
        report.lag_rows += rows
        self._observe.lag(sink, info.name, partitions=partitions, rows=rows)


def _seq(part: PartitionRef) -> int:
    return part.seq


def _warn(name: str, info: DatasetInfo, batch_id: str, failure: Failure) -> None:
    """The one WARNING of a batch's failures for one reason."""
    log.warning(
        "sink %s: dataset %s: batch %s: %s",
        name,
        info.name,
        batch_id,
        failure.summary(name),
        extra={
            "sink": name,
            "dataset": info.name,
            "batch_id": batch_id,
            "partitions": failure.partitions,
            "retryable": failure.retryable,
            "sink_fault": failure.sink_fault,
            "parked": failure.parked,
            "first_ids": failure.first_ids,
        },
    )
