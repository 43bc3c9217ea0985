"""A third-party `QueryableSink`: its `scan` receives the checked filter tree and compiles it."""

from __future__ import annotations

from collections.abc import Collection
from pathlib import Path
from typing import Any

import pyarrow as pa

import hypaware
from hypaware.core.filter import Filter, columns_of
from hypaware.core.filter_bind import to_arrow
from hypaware.core.types import DatasetInfo, ExportBatch, ExportOptions, ExportResult
from hypaware.export.driver import ExportDriver

from .helpers import INFO, cache_for, config, make_rows


class MemorySink:
    """Keeps what it exports in memory and scans it with the filter tree it is given."""

    def __init__(self) -> None:
        self.tables: list[pa.Table] = []
        self.filters: list[Filter | None] = []

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        for part in batch.partitions:
            self.tables.append(part.open().read_all())
        return ExportResult(exported=[p.id for p in batch.partitions])

    def scan(
        self,
        dataset: DatasetInfo,
        *,
        columns: Any = None,
        filter: Filter | None = None,
        exclude: Collection[str] = frozenset(),
    ) -> pa.RecordBatchReader:
        self.filters.append(filter)
        table = pa.concat_tables(self.tables) if self.tables else dataset.schema.empty_table()
        if filter is not None:
            table = table.filter(to_arrow(filter, dataset.schema))
        return table.to_reader()

    async def close(self) -> None:
        return None


async def test_scan_gets_the_bound_tree_and_answers_like_the_cache(tmp_path: Path) -> None:
    cfg = config(tmp_path)
    cache = cache_for(cfg)
    cache.append("events", make_rows(0, 60, day=0))
    cache.append("events", make_rows(100, 60, day=1))
    cache.seal("events")
    sink = MemorySink()
    spec = hypaware.SinkSpec(name="mem", plugin="@test/memory")
    driver = ExportDriver(cache, [(spec, sink)], state=tmp_path / "state")
    try:
        assert (await driver.run_once(backfill=True)).ok
        for part in cache.ready_partitions("events"):  # the sink alone holds the rows
            (cache.path / "events" / "sealed" / f"{part.id}.arrow").unlink()
        reader = await hypaware.query_async(
            driver, "events", sink="mem", since="2026-03-02", where="tokens > 10", keys=["c1"]
        )
        got = sorted(reader.read_all().column("row_id").to_pylist())
    finally:
        await driver.close()
    expected = sorted(
        r["row_id"] for r in make_rows(100, 60, day=1) if r["tokens"] > 10 and r["conv"] == "c1"
    )
    assert got == expected and got
    (tree,) = sink.filters
    assert isinstance(tree, Filter)
    assert columns_of(tree) == {INFO.time_column, "conv", "tokens"}
