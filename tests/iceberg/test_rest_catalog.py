"""The Iceberg sink against a REST catalog (the loopback server in `hypaware.testing`).

Exactly once across a crash, four writers committing at once, scripted 409
conflicts retried (and seen by the driver's observer), and credentials the
catalog vends used for the table's files on S3 (moto).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hypaware.core.config_loader import load_config
from hypaware.core.types import ExportOptions
from hypaware.export.driver import ExportDriver
from hypaware.export.observer import CountingObserver
from hypaware.iceberg.fileio import ObstoreFileIO
from hypaware.testing.servers.rest_catalog import RestCatalogServer

from ..driver.helpers import make_cache
from .helpers import DATASET, batch, build_sink, partition, rows_for, sink_config

pytestmark = pytest.mark.iceberg


@pytest.fixture
def rest(tmp_path: Path) -> Iterator[RestCatalogServer]:
    with RestCatalogServer(tmp_path / "rest", token="t0ken") as server:
        yield server


def rest_config(root: Path, server: RestCatalogServer, **config: Any) -> dict[str, Any]:
    catalog = {"type": "rest", "uri": server.uri, "token": "${REST_TOKEN}"}
    return sink_config(root, catalog=catalog, commit_backoff=0.01, **config)


@pytest.fixture(autouse=True)
def _token(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("REST_TOKEN", "t0ken")


def _parts(tag: str, n: int = 4, *, start: int = 0) -> list[Any]:
    return [
        partition(f"{tag}-p{p}", rows_for(f"{tag}-c{p}", p % 2, 6, start=start)) for p in range(n)
    ]


async def test_exactly_once_across_a_crash_before_the_ack(
    tmp_path: Path, rest: RestCatalogServer
) -> None:
    cfg = rest_config(tmp_path, rest)
    first = build_sink(cfg)
    parts = _parts("a")
    result = await first.export_batch(batch("b-1", parts), ExportOptions())
    assert len(result.exported) == 4 and result.rows_written == 24
    del first  # dies before the driver saw the ack

    second = build_sink(cfg)
    again = await second.export_batch(batch("b-1", parts), ExportOptions(attempt=2))
    assert set(again.exported) == {p.id for p in parts}
    assert again.rows_written == 0 and again.files_written == 0
    table = second.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert table.scan().to_arrow().num_rows == 24
    assert len(table.metadata.snapshots) == 1
    assert rest.commits >= 1
    assert ("POST", "/v1/namespaces/hyp/tables/messages") in rest.requests
    await second.close()


async def test_four_writers_at_once_commit_every_row_once(
    tmp_path: Path, rest: RestCatalogServer
) -> None:
    sinks = [build_sink(rest_config(tmp_path, rest, commit_retries=30)) for _ in range(4)]

    async def write(w: int) -> list[int]:
        rows = []
        for b in range(3):
            parts = _parts(f"w{w}b{b}", start=100 * b)
            result = await sinks[w].export_batch(batch(f"w{w}-b{b}", parts), ExportOptions())
            assert not result.retry_partitions, result.retry_partitions
            rows.append(result.rows_written)
        return rows

    assert await asyncio.gather(*(write(w) for w in range(4))) == [[24] * 3] * 4
    table = sinks[0].table.load_table(DATASET)  # type: ignore[attr-defined]
    rows = table.scan().to_arrow().to_pylist()
    assert len(rows) == 4 * 3 * 24
    assert len({(r["conversation_id"], r["tokens"]) for r in rows}) == len(rows)
    ids = [s.summary["hypaware.batch-id"] for s in table.metadata.snapshots]
    assert sorted(ids) == sorted(f"w{w}-b{b}" for w in range(4) for b in range(3))
    for sink in sinks:
        await sink.close()


async def test_a_409_is_retried_and_the_wait_is_told(
    tmp_path: Path, rest: RestCatalogServer
) -> None:
    sink = build_sink(rest_config(tmp_path, rest))
    await sink.export_batch(batch("b-0", _parts("warm", 1)), ExportOptions())
    # pyiceberg retries a failed commit 4 times itself (5 attempts); the 6th
    # conflict reaches hypaware's own retry, which waits and tries again.
    rest.fail_next_commits(6)
    waits: list[tuple[str, float]] = []
    opts = ExportOptions(on_retry_wait=lambda seconds, cause: waits.append((cause, seconds)))
    result = await sink.export_batch(batch("b-1", _parts("x")), opts)
    assert not result.retry_partitions and result.rows_written == 24
    assert rest.conflicts >= 6
    assert [cause for cause, _ in waits] == ["commit-conflict"]
    table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert [s.summary["hypaware.batch-id"] for s in table.metadata.snapshots] == ["b-0", "b-1"]
    await sink.close()


async def test_the_drivers_observer_hears_each_commit_retry_wait(
    tmp_path: Path, rest: RestCatalogServer
) -> None:
    cache = make_cache(tmp_path / "cache", count=30)
    config = load_config(rest_config(tmp_path, rest))
    observer = CountingObserver()
    driver = ExportDriver.from_config(config, cache=cache, observer=observer)
    rest.fail_next_commits(6)  # five absorbed by pyiceberg, the sixth by hypaware's retry
    try:
        report = await driver.run_once(backfill=True)
    finally:
        await driver.close()
    assert not report.sinks["archive"].errors
    counters = observer.of("archive")
    assert counters.rows == 30
    assert counters.retry_waits == {"commit-conflict": 1}
    assert 0.01 <= counters.retry_wait_seconds <= 0.015


async def test_conflicts_past_the_retries_send_the_batch_back(
    tmp_path: Path, rest: RestCatalogServer
) -> None:
    sink = build_sink(rest_config(tmp_path, rest, commit_retries=1))
    await sink.export_batch(batch("b-0", _parts("warm", 1)), ExportOptions())
    rest.fail_next_commits(100)
    result = await sink.export_batch(batch("b-1", _parts("x")), ExportOptions())
    assert {r.partition_id for r in result.retry_partitions} == {f"x-p{p}" for p in range(4)}
    assert all("commit lost to other writers" in r.reason for r in result.retry_partitions)
    rest.fail_next_commits(0)
    again = await sink.export_batch(batch("b-1", _parts("x")), ExportOptions(attempt=2))
    assert again.rows_written == 24
    await sink.close()


async def test_a_wrong_token_is_refused_clearly_without_showing_it(
    tmp_path: Path, rest: RestCatalogServer
) -> None:
    cfg = rest_config(tmp_path, rest)
    cfg["sinks"]["archive"]["config"]["catalog"]["token"] = "not-the-t0ken-9f3a"
    sink = build_sink(cfg)
    result = await sink.export_batch(batch("b-1", _parts("x", 1)), ExportOptions())
    (retry,) = result.retry_partitions
    assert "rest catalog" in retry.reason and "NotAuthorized" in retry.reason
    assert "9f3a" not in retry.reason
    await sink.close()


@pytest.mark.s3
async def test_credentials_the_catalog_vends_are_used_for_the_tables_files(
    tmp_path: Path,
) -> None:
    import boto3

    from hypaware.testing.servers.peers import run_moto_with_auth

    # moto checks keys: the destination's own are refused, only the vended ones work.
    with run_moto_with_auth("vended", unauthenticated=4) as peer:
        iam = boto3.client(
            "iam",
            endpoint_url=peer.endpoint,
            region_name=peer.region,
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        iam.create_user(UserName="catalog")
        iam.put_user_policy(
            UserName="catalog",
            PolicyName="s3",
            PolicyDocument='{"Version": "2012-10-17", "Statement": '
            '[{"Effect": "Allow", "Action": "s3:*", "Resource": "*"}]}',
        )
        key = iam.create_access_key(UserName="catalog")["AccessKey"]
        s3_props = {
            "s3.endpoint": peer.endpoint,
            "s3.region": peer.region,
            "s3.access-key-id": key["AccessKeyId"],
            "s3.secret-access-key": key["SecretAccessKey"],
        }
        vended = {k: v for k, v in s3_props.items() if "key" in k}
        with RestCatalogServer(
            tmp_path / "rest",
            warehouse=f"s3://{peer.bucket}/wh",
            catalog_properties=s3_props,
            vended=vended,
        ) as server:
            cfg = sink_config(
                tmp_path,
                destination="@hypaware/s3",
                bucket=peer.bucket,
                endpoint=peer.endpoint,
                allow_http=True,
                region=peer.region,
                access_key_id="AKIANOTVALID",
                secret_access_key="not-valid-either",
                prefix="wh",
                max_retries=0,
                catalog={"type": "rest", "uri": server.uri},
            )
            sink = build_sink(cfg)
            result = await sink.export_batch(batch("b-1", _parts("v")), ExportOptions())
            assert not result.retry_partitions, result.retry_partitions[0].reason
            assert result.rows_written == 24
            table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
            assert isinstance(table.io, ObstoreFileIO)
            assert table.io.root.store.config["access_key_id"] == key["AccessKeyId"]
            assert "vended" in table.io.root.label
            assert table.scan().to_arrow().num_rows == 24
            await sink.close()
