"""Every row once while exports and retention run during a query."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import hypaware
from hypaware.cache.local import LocalCache
from hypaware.core.types import PartitionRef
from hypaware.export.driver import ExportDriver
from hypaware.querying.api import plan_query

from .helpers import cache_for, config, drop_segments, export, ids, make_rows, parquet_sink


class HookedCache:
    """A cache that runs `hook` just before answering its `call`-th listing."""

    def __init__(self, inner: LocalCache, call: int, hook: Any) -> None:
        self.inner = inner
        self.call = call
        self.hook = hook
        self.calls = 0

    def datasets(self) -> Any:
        return self.inner.datasets()

    def partition(self, dataset: str, partition_id: str) -> PartitionRef | None:
        return self.inner.partition(dataset, partition_id)

    def ready_partitions(self, dataset: str, *, after: int = 0) -> Sequence[PartitionRef]:
        self.calls += 1
        if self.calls == self.call:
            self.hook()
        return self.inner.ready_partitions(dataset, after=after)


def _setup(tmp_path: Path) -> tuple[hypaware.HypawareConfig, LocalCache]:
    cfg = config(tmp_path, {"arch": parquet_sink(tmp_path / "out")})
    cache = cache_for(cfg)
    cache.append("events", make_rows(0, 50, day=0))
    cache.seal("events")
    export(cfg, cache)
    cache.append("events", make_rows(50, 50, day=1))
    cache.seal("events")
    return cfg, cache


async def test_exported_and_dropped_while_planning_is_planned_again(tmp_path: Path) -> None:
    cfg, cache = _setup(tmp_path)

    def export_and_drop() -> None:
        export(cfg, cache)
        drop_segments(cache)

    # Call 1 lists the cache, then the sink is looked at, call 2 lists again:
    # in between, the newest partitions are exported and dropped.
    hooked = HookedCache(cache, call=2, hook=export_and_drop)
    driver = ExportDriver.from_config(cfg, cache=hooked)  # type: ignore[arg-type]
    try:
        plan, reader = await plan_query(driver, "events")
        assert ids(reader) == list(range(100))
    finally:
        await driver.close()
    assert hooked.calls > 2, "the plan was not made again"
    assert plan.cache_partitions == []


async def test_partitions_dropped_after_planning_are_still_read(tmp_path: Path) -> None:
    cfg, cache = _setup(tmp_path)
    plan, reader = await plan_query(cfg, "events")
    assert len(plan.cache_partitions) == 3
    export(cfg, cache)
    drop_segments(cache)
    assert cache.ready_partitions("events") == []
    assert ids(reader) == list(range(100))


async def test_partition_exported_after_planning_comes_once(tmp_path: Path) -> None:
    cfg, cache = _setup(tmp_path)
    plan, reader = await plan_query(cfg, "events")
    export(cfg, cache)
    assert ids(reader) == list(range(100))
    # And afterwards it comes from the sink, still once.
    plan, reader = await plan_query(cfg, "events")
    assert plan.cache_partitions == []
    assert ids(reader) == list(range(100))
