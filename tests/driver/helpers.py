"""Test doubles for the driver: a manual clock, scripted sinks, a small cache."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from hypaware.cache.local import LocalCache
from hypaware.core.config import SinkSpec
from hypaware.core.types import (
    DatasetInfo,
    ExportBatch,
    ExportOptions,
    ExportResult,
    RetryPartition,
)

T0 = datetime(2026, 6, 1, tzinfo=UTC)

SCHEMA = pa.schema(
    [
        pa.field("row_id", pa.string(), nullable=False),
        pa.field("conv", pa.string()),
        pa.field("ts", pa.timestamp("us", tz="UTC")),
        pa.field("n", pa.int64()),
    ]
)


def events_info(name: str = "events") -> DatasetInfo:
    return DatasetInfo(
        name=name,
        schema=SCHEMA,
        time_column="ts",
        lookup_key="conv",
        partition_by=("conv",),
        time_grain="hour",
    )


def rows(
    start: int, count: int, *, convs: int = 3, at: datetime = T0, step: float = 420.0
) -> list[dict[str, object]]:
    """Rows ``start .. start+count-1``, one every `step` seconds (7 minutes by default)."""
    return [
        {
            "row_id": f"r{i:06d}",
            "conv": f"c{i % convs}",
            "ts": at + timedelta(seconds=step * i),
            "n": i,
        }
        for i in range(start, start + count)
    ]


def make_cache(path: Path, *, count: int = 30, **kwargs: object) -> LocalCache:
    cache = LocalCache(path, fsync=False, **kwargs)  # type: ignore[arg-type]
    cache.define_dataset(events_info())
    if count:
        cache.append("events", rows(0, count))
        cache.seal()
    return cache


def spec(name: str, **kwargs: object) -> SinkSpec:
    return SinkSpec(name=name, plugin="@test/scripted", **kwargs)  # type: ignore[arg-type]


class ManualClock:
    """A clock that moves only when the test says; sleepers wake when their time comes."""

    def __init__(self, start: datetime = T0) -> None:
        self.t = start
        self._sleepers: list[tuple[datetime, asyncio.Future[None]]] = []

    def now(self) -> datetime:
        return self.t

    async def sleep(self, seconds: float) -> None:
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._sleepers.append((self.t + timedelta(seconds=seconds), fut))
        try:
            await fut
        finally:
            self._sleepers = [(w, f) for w, f in self._sleepers if f is not fut]

    @property
    def sleeping(self) -> int:
        return sum(1 for _, f in self._sleepers if not f.done())

    async def advance(self, delta: timedelta, *, sleepers: int) -> None:
        """Move time on, wake who is due, and let the loop run until `sleepers` sleep again."""
        self.t += delta
        for when, fut in list(self._sleepers):
            if when <= self.t and not fut.done():
                fut.set_result(None)
        for _ in range(5000):
            await asyncio.sleep(0)
            if self.sleeping >= sleepers:
                return
        raise AssertionError(f"only {self.sleeping} of {sleepers} tasks went back to sleep")


class ScriptedSink:
    """A sink that reads every partition and can be told to fail, raise or hang."""

    def __init__(self, name: str = "scripted") -> None:
        self.name = name
        self.mode = "ok"  # ok | fail | raise | hang | garbage | partial
        self.acks: Counter[str] = Counter()
        self.rows: Counter[str] = Counter()
        self.batches: list[ExportBatch] = []
        self.attempts: list[int] = []
        self.closed = False
        self._release = asyncio.Event()
        # Set when an export begins, and when one returns its result: tests wait
        # on these instead of polling.
        self.entered = asyncio.Event()
        self.returned = asyncio.Event()
        self.fail_ids: Callable[[str], bool] = lambda _pid: False
        self.reason = "scripted partial failure"

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        self.batches.append(batch)
        self.attempts.append(opts.attempt)
        self.entered.set()
        if self.mode == "raise":
            raise RuntimeError("destination exploded")
        if self.mode == "fail":
            return ExportResult.failed(batch, "destination unavailable")
        if self.mode == "garbage":
            return "not a result"  # type: ignore[return-value]
        if self.mode == "hang":
            await self._release.wait()
            return ExportResult.failed(batch, "closed while waiting")
        exported: list[str] = []
        retry: list[RetryPartition] = []
        for part in batch.partitions:
            if self.mode == "partial" and self.fail_ids(part.id):
                retry.append(RetryPartition(part.id, self.reason))
                continue
            table = part.open().read_all()
            self.rows.update(table.column("row_id").to_pylist())
            self.acks[part.id] += 1
            exported.append(part.id)
        self.returned.set()
        return ExportResult(exported=exported, retry_partitions=retry, rows_written=1)

    async def close(self) -> None:
        self.closed = True
        self._release.set()


def sinks(
    *pairs: tuple[str, ScriptedSink], **spec_kwargs: object
) -> list[tuple[SinkSpec, ScriptedSink]]:
    return [(spec(name, **spec_kwargs), sink) for name, sink in pairs]


def all_row_ids(cache: LocalCache, datasets: Iterable[str] = ("events",)) -> set[str]:
    out: set[str] = set()
    for ds in datasets:
        for part in cache.ready_partitions(ds):
            out.update(part.open().read_all().column("row_id").to_pylist())
    return out
