"""A model of gateways sharing a bucket and a table: every sealed row is in one ledger bucket.

Two gateways, each with its own `LocalCache` and state dir, export through
the real sinks into one Parquet root and one Iceberg table (a shared sqlite
catalog). Hypothesis drives appends, seals, passes (ok, respooled, parked,
crashed between the sink's write and the store's settle), retries of parked
partitions, wiped caches, wiped state dirs, a sink added late, and backfills
(passes seal rows of their own too). After every
step, for every gateway, sink and dataset: the ledger's buckets add up to the
cache's sealed rows; each destination holds no row twice and no row nobody
sealed, and holds every row its gateway's ledger calls exported. At the end,
after every gateway has drained, each destination holds every row of the
live caches, once.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import shutil
import tempfile
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

import hypaware
from hypaware.cache.local import LocalCache
from hypaware.core.errors import StateError
from hypaware.core.types import DatasetInfo, ExportBatch, ExportOptions, ExportResult
from hypaware.export.accounts import BUCKETS, dataset_ledger
from hypaware.export.driver import ExportDriver
from hypaware.export.state import ProgressStore

pytestmark = [pytest.mark.iceberg, pytest.mark.slow]

T0 = datetime(2026, 3, 1, tzinfo=UTC)
SCHEMA = pa.schema(
    [
        pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("conv", pa.string()),
        pa.field("row_id", pa.string()),
    ]
)
INFO = DatasetInfo(name="events", schema=SCHEMA, time_column="ts", lookup_key="conv")
GATEWAYS = 2
GATEWAY = st.integers(0, GATEWAYS - 1)
# Rows a pass seals first (0 to 30, in one of six hours), so every run has data.
FRESH = st.tuples(st.integers(0, 30), st.integers(0, 5))


class Scripted:
    """A real sink whose outcome the model picks: ok, respooled, parked, or a crash."""

    def __init__(self, sink: Any, mode: str) -> None:
        self.sink = sink
        self.mode = mode

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        if self.mode == "respool":
            return ExportResult.failed(batch, "the model says: later")
        if self.mode == "park":
            return ExportResult.failed(batch, "the model says: never", retryable=False)
        return await self.sink.export_batch(batch, opts)

    async def close(self) -> None:
        await self.sink.close()


class Gateways(RuleBasedStateMachine):
    @initialize()
    def setup(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="hyp-model-"))
        self.next_row = 0
        self.sealed_ever: set[str] = set()
        self.late = [False] * GATEWAYS
        self.caches = [self._cache(g) for g in range(GATEWAYS)]
        self.steps = 0

    def teardown(self) -> None:
        try:
            if hasattr(self, "root"):
                event("steps", f"{self.steps // 5 * 5}-{self.steps // 5 * 5 + 4}")
                self._drain()
        finally:
            if hasattr(self, "root"):
                shutil.rmtree(self.root, ignore_errors=True)

    # ------------------------------------------------------------ helpers

    def _cache(self, g: int) -> LocalCache:
        cache = LocalCache(self.root / f"cache-{g}", fsync=False)
        cache.define_dataset(INFO)
        return cache

    def _config(self, g: int) -> dict[str, Any]:
        sinks: dict[str, Any] = {
            "files": {
                "writer": "@hypaware/format-parquet",
                "destination": "@hypaware/local-fs",
                "config": {"root": str(self.root / "bucket"), "max_partition_attempts": 1},
            },
            "table": {
                "writer": "@hypaware/format-iceberg",
                "destination": "@hypaware/local-fs",
                "config": {
                    "root": str(self.root / "warehouse"),
                    "namespace": "hyp",
                    "catalog": {"type": "sqlite", "path": str(self.root / "catalog.db")},
                    "max_partition_attempts": 1,
                },
            },
        }
        if self.late[g]:
            sinks["late"] = {
                "writer": "@hypaware/format-parquet",
                "destination": "@hypaware/local-fs",
                "config": {"root": str(self.root / f"late-{g}"), "max_partition_attempts": 1},
            }
        return {"state_dir": str(self.root / f"state-{g}"), "sinks": sinks}

    def _pass(self, g: int, mode: str, *, backfill: bool = False, retry: bool = False) -> None:
        config = hypaware.load_config(self._config(g))
        state = self.root / f"state-{g}"

        async def run() -> None:
            pairs = [
                (plan.spec, Scripted(hypaware.build(plan, config=config, state_dir=state), mode))
                for plan in hypaware.resolve(config)
            ]
            driver = ExportDriver(self.caches[g], pairs, state=state)
            try:
                if retry:
                    driver.unpark()
                if mode == "crash":
                    # The sink writes; the process dies before the store settles the batch.
                    def die(*args: Any, **kwargs: Any) -> None:
                        raise StateError("the model's crash before settling")

                    driver.state.settle_batch = die  # type: ignore[method-assign]
                await driver.run_once(backfill=backfill)
            finally:
                await driver.close()

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            pool.submit(asyncio.run, run()).result()

    def _drain(self) -> None:
        for g in range(GATEWAYS):
            self._pass(g, "ok", backfill=True, retry=True)
            self._pass(g, "ok")
        live = {r for g in range(GATEWAYS) for r in self._cache_rows(g)}
        for name, held in self._destinations().items():
            counts = Counter(held)
            assert max(counts.values(), default=1) == 1, name
            if name in ("bucket", "table"):
                assert live <= set(counts), (name, len(live - set(counts)))

    def _cache_rows(self, g: int, parts: Any = None) -> list[str]:
        cache = self.caches[g]
        out: list[str] = []
        for part in parts if parts is not None else cache.ready_partitions("events"):
            out += part.open().read_all().column("row_id").to_pylist()
        return out

    def _destinations(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for name in ("bucket", *(f"late-{g}" for g in range(GATEWAYS))):
            rows: list[str] = []
            for path in sorted((self.root / name).rglob("*.parquet")):
                rows += pq.read_table(path, columns=["row_id"]).column("row_id").to_pylist()
            out[name] = rows
        from pyiceberg.catalog.sql import SqlCatalog

        if (self.root / "catalog.db").exists():
            catalog = SqlCatalog("hypaware", uri=f"sqlite:///{self.root / 'catalog.db'}")
            try:
                if catalog.table_exists("hyp.events"):
                    table = catalog.load_table("hyp.events")
                    out["table"] = table.scan().to_arrow().column("row_id").to_pylist()
            finally:
                catalog.engine.dispose()
        return out

    # ------------------------------------------------------------ rules

    @rule(g=st.integers(0, GATEWAYS - 1), n=st.integers(1, 30), hour=st.integers(0, 5))
    def append_and_seal(self, g: int, n: int, hour: int) -> None:
        self.steps += 1
        self._append(g, n, hour)

    def _append(self, g: int, n: int, hour: int) -> None:
        start = self.next_row
        self.next_row += n
        base = T0 + timedelta(hours=hour)
        rows = [
            {"ts": base + timedelta(seconds=i), "conv": f"c{i % 2}", "row_id": f"r{start + i}"}
            for i in range(n)
        ]
        self.caches[g].append("events", pa.Table.from_pylist(rows, schema=SCHEMA))
        sealed = self.caches[g].seal()
        for part in sealed:
            self.sealed_ever.update(part.open().read_all().column("row_id").to_pylist())

    # One rule per outcome, so that passes are most of what the model does.
    @rule(g=GATEWAY, fresh=FRESH, backfill=st.booleans())
    def pass_ok(self, g: int, fresh: tuple[int, int], backfill: bool) -> None:
        self._step_pass(g, fresh, "ok", backfill)

    @rule(g=GATEWAY, fresh=FRESH, backfill=st.booleans())
    def pass_respooled(self, g: int, fresh: tuple[int, int], backfill: bool) -> None:
        self._step_pass(g, fresh, "respool", backfill)

    @rule(g=GATEWAY, fresh=FRESH, backfill=st.booleans())
    def pass_parked(self, g: int, fresh: tuple[int, int], backfill: bool) -> None:
        self._step_pass(g, fresh, "park", backfill)

    @rule(g=GATEWAY, fresh=FRESH, backfill=st.booleans())
    def pass_crashed(self, g: int, fresh: tuple[int, int], backfill: bool) -> None:
        self._step_pass(g, fresh, "crash", backfill)

    def _step_pass(self, g: int, fresh: tuple[int, int], mode: str, backfill: bool) -> None:
        # Swarm testing leaves appends out of many runs: passes seal rows of their own.
        event("pass", f"{mode}{' backfill' if backfill else ''}")
        self.steps += 1
        n, hour = fresh
        if n:
            self._append(g, n, hour)
        self._pass(g, mode, backfill=backfill)

    @rule(g=st.integers(0, GATEWAYS - 1))
    def retry_parked(self, g: int) -> None:
        event("retry_parked")
        self.steps += 1
        self._pass(g, "ok", retry=True)

    @rule(g=st.integers(0, GATEWAYS - 1))
    def wipe_cache(self, g: int) -> None:
        event("wipe_cache")
        self.steps += 1
        shutil.rmtree(self.root / f"cache-{g}")
        self.caches[g] = self._cache(g)

    @rule(g=st.integers(0, GATEWAYS - 1))
    def wipe_state(self, g: int) -> None:
        # The state dir is lost and the cache kept: receipts and the table's
        # record are what stop a backfill from doubling rows already there.
        event("wipe_state")
        self.steps += 1
        shutil.rmtree(self.root / f"state-{g}", ignore_errors=True)

    @precondition(lambda self: not all(self.late))
    @rule(g=st.integers(0, GATEWAYS - 1))
    def add_a_late_sink(self, g: int) -> None:
        event("add_a_late_sink")
        self.steps += 1
        self.late[g] = True

    # ------------------------------------------------------------ invariants

    @invariant()
    def every_sealed_row_is_in_one_bucket_and_held_once(self) -> None:
        if not hasattr(self, "root"):
            return
        held = self._destinations()
        for name, rows in held.items():
            counts = Counter(rows)
            doubled = [r for r, n in counts.items() if n > 1]
            assert not doubled, f"{name} holds {doubled[:3]} twice"
            assert set(counts) <= self.sealed_ever, f"{name} holds rows nobody sealed"
        for g in range(GATEWAYS):
            path = self.root / f"state-{g}"
            if not (path / "progress.sqlite").exists():
                continue
            store = ProgressStore(path)
            try:
                for sink in store.sinks():
                    ledger = dataset_ledger(self.caches[g], store, sink, "events")
                    assert ledger.balanced, (g, sink, ledger)
                    target = {"files": "bucket", "table": "table", "late": f"late-{g}"}[sink]
                    exported = self._exported_rows(g, store, sink)
                    assert ledger.exported.rows == len(exported), (g, sink, ledger)
                    missing = exported - set(held.get(target, []))
                    assert not missing, (g, sink, f"{len(missing)} exported rows not held")
                    assert sum(getattr(ledger, b).rows for b in BUCKETS) == ledger.sealed.rows
            finally:
                store.close()

    def _exported_rows(self, g: int, store: ProgressStore, sink: str) -> set[str]:
        """The rows of the partitions the ledger puts in "exported"."""
        cache = self.caches[g]
        if store.cache_identity() != cache.identity:
            return set()  # the store's progress is a wiped cache's: none of it is this one's
        high_water = store.high_water(sink, "events")
        point = store.start_point(sink, "events")
        pending = {e.partition_id for e in store.respooled(sink, "events")}
        pending |= {p.partition_id for p in store.parked(sink, "events")}
        pending |= {pid for f in store.in_flight(sink) for pid in f.partition_ids}
        parts = [
            p
            for p in cache.ready_partitions("events")
            if high_water is not None
            and p.seq <= high_water
            and p.id not in pending
            and not (point is not None and point.before(p.seq))
        ]
        return set(self._cache_rows(g, parts))


Gateways.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
test_gateways_sharing_a_bucket_and_a_table = Gateways.TestCase
