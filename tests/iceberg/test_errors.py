"""Catalogs that cannot be reached or are locked: clear errors, nothing committed half-way."""

from __future__ import annotations

import socket
import sqlite3
from pathlib import Path

import pytest

from hypaware.core.errors import SinkClosedError
from hypaware.core.types import ExportOptions

from .helpers import DATASET, batch, build_sink, partition, rows_for, sink_config

pytestmark = pytest.mark.iceberg


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _assert_named(reason: str) -> None:
    for part in ("sink 'archive'", "dataset 'messages'", "table hyp.messages"):
        assert part in reason, reason


async def test_unreachable_sql_catalog(tmp_path: Path) -> None:
    uri = f"sqlite:///{tmp_path / 'no-such-dir' / 'catalog.db'}"
    sink = build_sink(sink_config(tmp_path, catalog={"type": "sql", "uri": uri}))
    result = await sink.export_batch(
        batch("b", [partition("p", rows_for("a", 0, 2))]), ExportOptions()
    )
    (retry,) = result.retry_partitions
    _assert_named(retry.reason)
    assert "cannot open the catalog" in retry.reason
    assert retry.retryable
    await sink.close()


async def test_unreachable_rest_catalog(tmp_path: Path) -> None:
    uri = f"http://127.0.0.1:{_free_port()}"
    sink = build_sink(sink_config(tmp_path, catalog={"type": "rest", "uri": uri, "token": "t"}))
    result = await sink.export_batch(
        batch("b", [partition("p", rows_for("a", 0, 2))]), ExportOptions()
    )
    (retry,) = result.retry_partitions
    _assert_named(retry.reason)
    assert f"rest catalog '{uri}'" in retry.reason
    await sink.close()


async def test_locked_catalog_is_retried_later_and_commits_nothing(tmp_path: Path) -> None:
    cfg = sink_config(
        tmp_path, catalog={"lock_timeout": 0.2}, commit_retries=1, commit_backoff=0.01
    )
    sink = build_sink(cfg)
    ok = await sink.export_batch(
        batch("b1", [partition("p1", rows_for("a", 0, 2))]), ExportOptions()
    )
    assert ok.exported == ("p1",)

    db = tmp_path / "state" / "sinks" / "archive" / "iceberg-catalog.db"
    holder = sqlite3.connect(db, timeout=0)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        result = await sink.export_batch(
            batch("b2", [partition("p2", rows_for("b", 1, 2))]), ExportOptions()
        )
    finally:
        holder.rollback()
        holder.close()

    (retry,) = result.retry_partitions
    _assert_named(retry.reason)
    assert "locked" in retry.reason
    assert retry.retryable
    data = tmp_path / "warehouse" / "hyp" / "messages" / "data"
    assert not list(data.glob("ts_day=2026-03-02/*.parquet")), "files of the failed batch remain"

    again = await sink.export_batch(
        batch("b2", [partition("p2", rows_for("b", 1, 2))]), ExportOptions()
    )
    assert again.exported == ("p2",)
    table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert table.scan().to_arrow().num_rows == 4
    await sink.close()


async def test_close_is_idempotent_and_final(tmp_path: Path) -> None:
    sink = build_sink(sink_config(tmp_path))
    await sink.close()
    await sink.close()
    with pytest.raises(SinkClosedError):
        await sink.table.write_batch(batch("b", []), ExportOptions())  # type: ignore[attr-defined]
