"""A model-based test of cache + driver + progress: exported rows == sealed rows, exactly.

Appends, seals, exports through a sink that fails at random (whole batches, some
partitions, or by raising), restarts (fresh objects over the same directories)
and retention are interleaved by hypothesis; after every step the sink holds only
sealed rows, each at most once, and the cache still holds every sealed row some
sink has not exported. After a final drain the sink holds every sealed row.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import tempfile
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from hypaware.cache.local import LocalCache
from hypaware.core.types import ExportBatch, ExportOptions, ExportResult, RetryPartition
from hypaware.export.driver import ExportDriver
from tests.driver.helpers import T0, events_info, rows, spec


class ModelSink:
    """A destination keyed by partition id (so a re-send replaces), failing as told."""

    def __init__(self) -> None:
        self.mode = "ok"
        self.salt = 0
        self.held: dict[str, list[str]] = {}
        self.acks: Counter[str] = Counter()

    def _unlucky(self, pid: str) -> bool:
        return hashlib.sha256(f"{self.salt}:{pid}".encode()).digest()[0] % 2 == 0

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        if self.mode == "raise":
            raise ConnectionError("connection reset")
        if self.mode == "fail":
            return ExportResult.failed(batch, "503")
        exported, retry = [], []
        for part in batch.partitions:
            if self.mode == "partial" and self._unlucky(part.id):
                retry.append(RetryPartition(part.id, "429"))
                continue
            self.held[part.id] = part.open().read_all().column("row_id").to_pylist()
            self.acks[part.id] += 1
            exported.append(part.id)
        return ExportResult(exported=exported, retry_partitions=retry)

    async def close(self) -> None:
        return None


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def now(self) -> datetime:
        return self.t

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)


class CacheAndDriver(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="hypaware-model-"))
        self.clock = Clock()
        self.cache = self._open_cache()
        self.cache.define_dataset(events_info())
        self.sink = ModelSink()
        self.next_row = 0
        self.open_rows: set[str] = set()
        self.sealed_rows: set[str] = set()

    def _open_cache(self) -> LocalCache:
        return LocalCache(
            self.dir / "cache", fsync=False, retention=timedelta(hours=1), clock=self.clock.now
        )

    def _export(self) -> None:
        async def once() -> None:
            driver = ExportDriver(
                self.cache,
                [(spec("model", max_batch_rows=7), self.sink)],
                state=self.dir / "state",
                clock=self.clock,
                close_sinks=False,
            )
            try:
                await driver.run_once(backfill=True)
            finally:
                await driver.close()

        asyncio.run(once())

    @initialize(n=st.integers(1, 30))
    def seeded(self, n: int) -> None:
        self.append(n, 3, 0)
        self.seal()

    @rule(n=st.integers(1, 12), convs=st.integers(1, 3), hours=st.integers(0, 3))
    def append(self, n: int, convs: int, hours: int) -> None:
        batch = rows(self.next_row, n, convs=convs, at=T0 + timedelta(hours=hours))
        self.next_row += n
        self.cache.append("events", batch)
        self.open_rows.update(str(r["row_id"]) for r in batch)

    @rule()
    def seal(self) -> None:
        self.cache.seal()
        self.sealed_rows |= self.open_rows
        self.open_rows = set()

    @rule(mode=st.sampled_from(["ok", "fail", "partial", "raise"]), salt=st.integers(0, 9))
    def export(self, mode: str, salt: int) -> None:
        self.sink.mode, self.sink.salt = mode, salt
        self._export()

    @rule()
    def restart(self) -> None:
        self.cache = self._open_cache()

    @rule(hours=st.integers(1, 3))
    def time_passes(self, hours: int) -> None:
        # Retention runs after the next export, with the sink's progress as its floor.
        self.clock.t += timedelta(hours=hours)

    def _exported_rows(self) -> Counter[str]:
        out: Counter[str] = Counter()
        for ids in self.sink.held.values():
            out.update(ids)
        return out

    @invariant()
    def never_more(self) -> None:
        exported = self._exported_rows()
        assert set(exported) <= self.sealed_rows
        assert all(n == 1 for n in exported.values())
        assert all(n == 1 for n in self.sink.acks.values())

    @invariant()
    def nothing_needed_is_dropped(self) -> None:
        in_cache: set[str] = set()
        for part in self.cache.ready_partitions("events"):
            in_cache.update(part.open().read_all().column("row_id").to_pylist())
        assert self.sealed_rows - set(self._exported_rows()) <= in_cache

    def teardown(self) -> None:
        try:
            self.seal()
            self.sink.mode = "ok"
            self._export()  # respooled partitions
            self._export()
            assert set(self._exported_rows()) == self.sealed_rows
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


CacheAndDriver.TestCase.settings = settings(max_examples=30, stateful_step_count=25, deadline=None)
TestCacheAndDriver = CacheAndDriver.TestCase
