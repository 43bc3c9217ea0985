"""The same question gets the same rows from local-fs Parquet, S3 (moto) Parquet and Iceberg."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import hypaware
from hypaware.testing.servers.peers import AzuritePeer, S3Peer

from .helpers import cache_for, config, export, iceberg_sink, make_rows, parquet_sink

QUESTIONS: list[dict[str, Any]] = [
    {},
    {"since": "2026-03-02", "until": "2026-03-04"},
    {"keys": ["c2"], "columns": ["row_id", "ts", "tokens"]},
    {
        "since": "2026-03-01T12:00:00Z",
        "keys": ["c0", "c1"],
        "where": "tokens >= 8 and role = 'user'",
    },
    {"where": "role in ('user') and not tokens is null", "limit": 500},
]


def _s3(peer: S3Peer, prefix: str) -> dict[str, Any]:
    return peer.destination_config(prefix)


def _sorted(table: pa.Table) -> pa.Table:
    return table.sort_by("row_id") if "row_id" in table.column_names else table


@pytest.mark.s3
@pytest.mark.iceberg
def test_local_s3_and_iceberg_answer_alike(tmp_path: Path, moto_s3: S3Peer) -> None:
    prefix = f"agree-{tmp_path.name}"
    _agree(
        tmp_path,
        {
            "local": parquet_sink(tmp_path / "out"),
            "s3": {
                "writer": "@hypaware/format-parquet",
                "destination": "@hypaware/s3",
                "config": _s3(moto_s3, prefix),
            },
            "ice": iceberg_sink(tmp_path / "wh"),
            "ice_s3": {
                "writer": "@hypaware/format-iceberg",
                "destination": "@hypaware/s3",
                "config": {**_s3(moto_s3, f"{prefix}-ice"), "namespace": "hyp"},
            },
        },
    )


@pytest.mark.azure
def test_local_and_azure_answer_alike(tmp_path: Path, azurite: AzuritePeer) -> None:
    azure = {
        "account": azurite.account,
        "container": azurite.container,
        "account_key": azurite.account_key,
        "endpoint": azurite.endpoint,
        "prefix": f"agree-{tmp_path.name}",
    }
    _agree(
        tmp_path,
        {
            "local": parquet_sink(tmp_path / "out"),
            "azure": {
                "writer": "@hypaware/format-parquet",
                "destination": "@hypaware/azure",
                "config": azure,
            },
        },
    )


def _agree(tmp_path: Path, sinks: dict[str, Any]) -> None:
    cfg = config(tmp_path, sinks)
    cache = cache_for(cfg)
    for day in range(4):
        cache.append("events", make_rows(day * 1000, 120, day=day, hour=day * 3))
    cache.seal("events")
    assert export(cfg, cache).ok
    # Some rows only in the cache, some only in the sinks.
    cache.append("events", make_rows(9000, 40, day=3, hour=20))
    cache.seal("events")
    for part in cache.ready_partitions("events")[:4]:
        (cache.path / "events" / "sealed" / f"{part.id}.arrow").unlink()

    for question in QUESTIONS:
        answers = {}
        for sink in sinks:
            limit = question.get("limit")
            args = {k: v for k, v in question.items() if k != "limit"}
            table = hypaware.query(cfg, "events", sink=sink, **args).read_all()
            answers[sink] = _sorted(table).slice(0, limit) if limit else _sorted(table)
        local = answers.pop("local")
        assert local.num_rows > 0, question
        for sink, table in answers.items():
            assert table.equals(local), (sink, question)


@pytest.mark.iceberg
def test_iceberg_tables_written_before_the_record_fall_back_on_progress(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import hypaware.iceberg.commit as commit

    real = commit._record_props
    # The first export commits as releases before the record did: no record.
    monkeypatch.setattr(commit, "_record_props", lambda table, batch, parts, base, what: base)
    cfg = config(tmp_path, {"ice": iceberg_sink(tmp_path / "wh")})
    cache = cache_for(cfg)
    cache.append("events", make_rows(0, 60, day=0))
    cache.seal("events")
    assert export(cfg, cache).ok
    cache.append("events", make_rows(60, 20, day=1))
    cache.seal("events")
    table = hypaware.query(cfg, "events", columns=["row_id"]).read_all()
    assert sorted(table.column("row_id").to_pylist()) == list(range(80))
    # Later commits carry the record (marked legacy); the query still reads each row once.
    monkeypatch.setattr(commit, "_record_props", real)
    assert export(cfg, cache).ok
    cache.append("events", make_rows(80, 10, day=2))
    cache.seal("events")
    table = hypaware.query(cfg, "events", columns=["row_id"]).read_all()
    assert sorted(table.column("row_id").to_pylist()) == list(range(90))
