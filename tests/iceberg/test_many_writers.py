"""Several processes exporting disjoint partitions to one table through one sqlite catalog."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import pytest
from pyiceberg.catalog.sql import SqlCatalog

from hypaware.iceberg.compact import live_files
from hypaware.iceberg.record import read_record

from .helpers import DATASET, build_sink, sink_config
from .workers import export_share

pytestmark = [pytest.mark.iceberg, pytest.mark.slow]

WRITERS = 4
BATCHES = 3


@pytest.mark.parametrize("maintain", [False, True], ids=["appends", "with-maintenance"])
def test_four_processes_commit_every_row_exactly_once(tmp_path: Path, maintain: bool) -> None:
    ctx = multiprocessing.get_context("spawn")
    manager = ctx.Manager()
    try:
        start = manager.Event()
        with ProcessPoolExecutor(max_workers=WRITERS, mp_context=ctx) as pool:
            futures = [
                pool.submit(export_share, str(tmp_path), w, BATCHES, start, maintain)
                for w in range(WRITERS)
            ]
            start.set()
            results = [f.result(timeout=240) for f in futures]
    finally:
        manager.shutdown()

    assert results == [[200] * BATCHES] * WRITERS
    catalog = SqlCatalog("hypaware", uri=f"sqlite:///{tmp_path / 'shared-catalog.db'}")
    table = catalog.load_table("hyp.messages")
    rows = table.scan().to_arrow().to_pylist()
    assert len(rows) == WRITERS * BATCHES * 10 * 20
    identities = {(r["conversation_id"], r["tokens"]) for r in rows}
    assert len(identities) == len(rows), "a row was committed twice"
    for w in range(WRITERS):
        for p in range(10):
            assert {t for c, t in identities if c == f"w{w}-c{p}"} == {
                100 * b + i for b in range(BATCHES) for i in range(20)
            }
    snapshots = table.metadata.snapshots
    if maintain:
        # Compacted and expired while the others appended; the record holds every batch.
        record = read_record(table, "t")
        assert sum(r.count for r in record.writers.values()) == WRITERS * BATCHES * 10
        days: dict[int, int] = {}
        for f in live_files(table):
            days[f.partition[0]] = days.get(f.partition[0], 0) + 1
        assert len(snapshots) < WRITERS * BATCHES
        assert max(days.values()) < WRITERS * BATCHES, days
    else:
        assert len(snapshots) == WRITERS * BATCHES
        assert len({s.summary["hypaware.batch-id"] for s in snapshots}) == WRITERS * BATCHES
    catalog.engine.dispose()


async def test_a_second_writer_finds_the_table_the_first_registered(tmp_path: Path) -> None:
    shared = {"type": "sqlite", "path": str(tmp_path / "shared.db")}
    one = build_sink(sink_config(tmp_path, state=tmp_path / "s1", catalog=shared))
    two = build_sink(sink_config(tmp_path, state=tmp_path / "s2", catalog=shared))
    a = one.table.load_table(DATASET)  # type: ignore[attr-defined]
    b = two.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert a.metadata.table_uuid == b.metadata.table_uuid
    await one.close()
    await two.close()
