"""Model-based: whatever appends, seals, exports (failing, losing acks, crashing) and
retention do, a query returns exactly the sealed rows that match it: none twice, none missing.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import attrs
import pyarrow as pa
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from hypaware.blob.sink import BlobSink
from hypaware.cache.local import LocalCache
from hypaware.core.config import SinkSpec
from hypaware.core.errors import TransientStoreError
from hypaware.core.resolver import BuildContext
from hypaware.core.types import ExportBatch, ExportOptions, ExportResult, RetryPartition
from hypaware.export.driver import ExportDriver
from hypaware.plugins.format_parquet import create as parquet_encoder
from hypaware.plugins.local_fs import LocalFsConfig
from hypaware.plugins.local_fs import create as local_fs
from hypaware.querying.api import plan_query

from .helpers import DAY0, INFO, make_rows

MODES = ("ok", "fail", "lose_ack", "half", "crash", "outage")


class FakeClock:
    def __init__(self, now: datetime) -> None:
        self.current = now

    def now(self) -> datetime:
        return self.current

    async def sleep(self, seconds: float) -> None:
        self.current += timedelta(seconds=seconds)


class ScriptedSink(BlobSink):
    """A real Parquet blob sink whose reads and acknowledgements a test can take away."""

    mode = "ok"

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        if self.mode == "fail":
            return ExportResult.failed(batch, "scripted failure")
        if self.mode == "half":
            # The second half of the partitions cannot be read: the sink leaves
            # them out of its files and sends them back for retry.
            parts = list(batch.partitions)
            cut = len(parts) // 2
            parts[cut:] = [attrs.evolve(p, opener=_unreadable) for p in parts[cut:]]
            batch = attrs.evolve(batch, partitions=parts)
        if self.mode == "outage":
            return await self._export_with_outage(batch, opts)
        result = await super().export_batch(batch, opts)
        if self.mode in ("ok", "half"):
            return result
        if self.mode == "crash":
            # Files written, the process dies before the ack: the batch stays in flight.
            raise asyncio.CancelledError
        # lose_ack: everything written, no ack reaches the driver; it sends the
        # partitions again in another batch.
        lost = [RetryPartition(p, "ack lost") for p in result.exported]
        return ExportResult(retry_partitions=(*result.retry_partitions, *lost))

    async def _export_with_outage(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        """The destination fails after the batch's first object: the batch stays open."""
        store = self.store
        put = store.put
        landed = 0

        async def failing_put(*args: Any, **kwargs: Any) -> Any:
            nonlocal landed
            if landed:
                raise TransientStoreError("scripted: connection reset")
            landed += 1
            return await put(*args, **kwargs)

        store.put = failing_put  # type: ignore[method-assign]
        try:
            return await super().export_batch(batch, opts)
        finally:
            del store.put


def _unreadable() -> pa.RecordBatchReader:
    raise OSError("scripted: segment unreadable")


def _matches(row: dict[str, Any], f: dict[str, Any]) -> bool:
    if f["since"] is not None and row["ts"] < f["since"]:
        return False
    if f["until"] is not None and row["ts"] >= f["until"]:
        return False
    if f["keys"] is not None and row["conv"] not in f["keys"]:
        return False
    return f["min_tokens"] is None or row["tokens"] > f["min_tokens"]


def _window(since: int | None, days: int | None) -> dict[str, Any]:
    start = None if since is None else DAY0 + timedelta(days=since, hours=since * 5)
    end = None if days is None else (start or DAY0) + timedelta(days=days, hours=3)
    return {"since": start, "until": end}


filters = st.builds(
    lambda window, keys, tokens: {**window, "keys": keys, "min_tokens": tokens},
    st.builds(_window, st.none() | st.integers(0, 3), st.none() | st.integers(0, 2)),
    st.none() | st.sets(st.sampled_from(["c0", "c1", "c2"]), min_size=1),
    st.none() | st.integers(0, 16),
)


class QueryModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="hyp-query-model-"))
        self.clock = FakeClock(DAY0 + timedelta(days=5))
        self.cache = LocalCache(
            self.root / "cache",
            retention=timedelta(hours=1),
            fsync=False,
            clock=self.clock.now,
        )
        self.cache.define_dataset(INFO)
        ctx = BuildContext(sink_name="arch", state_dir=self.root, base_dir=self.root)
        store = local_fs(LocalFsConfig(root=str(self.root / "out")), ctx)
        self.sink = ScriptedSink("arch", store, parquet_encoder(None, ctx))
        self.loop = asyncio.new_event_loop()
        spec = SinkSpec(name="arch", writer="w", destination="d", max_batch_rows=40)
        self.driver = ExportDriver(
            self.cache, [(spec, self.sink)], state=self.root / "state", clock=self.clock
        )
        self.next_id = 0
        self.open_rows: list[dict[str, Any]] = []
        self.sealed: list[dict[str, Any]] = []

    def teardown(self) -> None:
        self.loop.run_until_complete(self.driver.close())
        self.loop.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # ------------------------------------------------------------- changes

    @rule(day=st.integers(0, 3), count=st.integers(1, 15), hour=st.integers(0, 23))
    def append(self, day: int, count: int, hour: int) -> None:
        rows = make_rows(self.next_id, count, day=day, hour=hour)
        self.next_id += count
        self.cache.append(INFO.name, rows)
        self.open_rows.extend(rows)

    @rule()
    def seal(self) -> None:
        self.cache.seal(INFO.name)
        self.sealed.extend(self.open_rows)
        self.open_rows = []

    @rule(mode=st.sampled_from(MODES))
    def export(self, mode: str) -> None:
        self.sink.mode = mode
        self.loop.run_until_complete(self.driver.run_once(backfill=True))

    @rule(hours=st.integers(0, 3))
    def retention(self, hours: int) -> None:
        self.clock.current += timedelta(hours=hours)
        self.cache.enforce_retention(self.driver.floors(), now=self.clock.current)

    # ------------------------------------------------------------- queries

    def _run(self, f: dict[str, Any]) -> tuple[Any, pa.RecordBatchReader]:
        return self.loop.run_until_complete(
            plan_query(
                self.driver,
                INFO.name,
                columns=["row_id"],
                since=f["since"],
                until=f["until"],
                keys=sorted(f["keys"]) if f["keys"] is not None else None,
                where=f"tokens > {f['min_tokens']}" if f["min_tokens"] is not None else None,
            )
        )

    def _expected(self, f: dict[str, Any]) -> list[int]:
        return sorted(r["row_id"] for r in self.sealed if _matches(r, f))

    @rule(f=filters)
    def query(self, f: dict[str, Any]) -> None:
        _plan, reader = self._run(f)
        got = sorted(reader.read_all().column("row_id").to_pylist())
        assert got == self._expected(f)

    @precondition(lambda self: self.sealed)
    @rule(f=filters, mode=st.sampled_from(MODES), more=st.integers(0, 10))
    def query_while_exporting(self, f: dict[str, Any], mode: str, more: int) -> None:
        """Plan, then export, drop by retention and seal more, then read the rows."""
        _plan, reader = self._run(f)
        before = self._expected(f)
        if more:
            self.append(day=1, count=more, hour=5)
            self.seal()
        self.export(mode)
        self.retention(2)
        got = sorted(reader.read_all().column("row_id").to_pylist())
        assert len(got) == len(set(got)), "a row came back twice"
        assert set(before) <= set(got), f"rows missing: {sorted(set(before) - set(got))[:10]}"
        assert set(got) <= set(self._expected(f))

    @invariant()
    def all_rows(self) -> None:
        _plan, reader = self._run({"since": None, "until": None, "keys": None, "min_tokens": None})
        got = sorted(reader.read_all().column("row_id").to_pylist())
        assert got == sorted(r["row_id"] for r in self.sealed)


QueryModel.TestCase.settings = settings(
    max_examples=15,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_query_model = QueryModel.TestCase
