"""Receipts: what a blob sink wrote, recorded at the destination itself.

Two sinks with separate batch indexes (two state directories) on one root
and one cache identity write each partition once; a batch that never
finished leaves no receipt behind; a damaged receipt costs a rewrite, never
rows.
"""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import attrs
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypaware import ExportOptions
from hypaware.blob.batch_index import INDEX_FILE, BatchIndex
from hypaware.blob.object_names import batch_stem
from hypaware.blob.receipts import RECEIPTS_DIR, Receipt, ReceiptError, day_prefixes, writer_dir
from hypaware.blob.sink import BlobSink

from .data import rich_batch
from .test_blob_sink import build

OPTS = ExportOptions()


def _sink(tmp_path: Path, app: str) -> BlobSink:
    """A sink on the shared root ``out`` with its own state directory `app`."""
    sink = build(tmp_path / app, "@hypaware/local-fs", root=str(tmp_path / "out"))
    assert isinstance(sink, BlobSink)
    assert sink.index.path is not None and app in str(sink.index.path)
    return sink


def _row_ids(root: Path) -> Counter[int]:
    out: Counter[int] = Counter()
    for path in root.rglob("*.parquet"):
        out.update(pq.read_table(path).column("row_id").to_pylist())
    return out


def _batch(batch_id: str, identity: str = "cache-a", **kwargs: Any) -> Any:
    return attrs.evolve(rich_batch(batch_id, **kwargs), cache_identity=identity)


async def test_two_state_dirs_on_one_root_write_each_partition_once(tmp_path: Path) -> None:
    one, two = _sink(tmp_path, "one"), _sink(tmp_path, "two")
    first = await one.export_batch(_batch("b1", parts=3, rows=20), OPTS)
    assert first.already_held == () and len(first.exported) == 3
    # The other app exports the same partitions (and one more) in its own batch.
    second = await two.export_batch(_batch("b2", parts=4, rows=20), OPTS)
    assert sorted(second.already_held) == ["events-p0", "events-p1", "events-p2"]
    assert sorted(second.exported) == ["events-p0", "events-p1", "events-p2", "events-p3"]
    assert second.rows_written == 20
    ids = _row_ids(tmp_path / "out")
    assert set(ids) == set(range(80)) and set(ids.values()) == {1}
    # And back: the first app learns of the fourth partition from its receipt.
    third = await one.export_batch(_batch("b3", parts=4, rows=20), OPTS)
    assert len(third.already_held) == 4 and third.files_written == 0
    await one.close()
    await two.close()


async def test_another_cache_identity_is_not_held_by_these_receipts(tmp_path: Path) -> None:
    one, two = _sink(tmp_path, "one"), _sink(tmp_path, "two")
    await one.export_batch(_batch("b1", parts=2, rows=10), OPTS)
    # Same partition ids, another cache: its rows are other rows.
    other = await two.export_batch(_batch("b2", "cache-b", parts=2, rows=10, first_id=500), OPTS)
    assert other.already_held == () and other.rows_written == 20
    await one.close()
    await two.close()


async def test_a_batch_that_never_finished_takes_its_receipt_with_it(tmp_path: Path) -> None:
    one = _sink(tmp_path, "one")
    batch = _batch("b1", parts=2, rows=10)
    # The process dies after the receipt is put, before the index marks the batch finished.
    finish = one.index.finish
    one.index.finish = lambda stem: (_ for _ in ()).throw(SystemExit("killed"))  # type: ignore[method-assign]
    with pytest.raises(SystemExit):
        await one.export_batch(batch, OPTS)
    one.index.finish = finish  # type: ignore[method-assign]
    receipts = list((tmp_path / "out" / RECEIPTS_DIR).rglob("*.json"))
    assert len(receipts) == 1
    await one.close()
    # Restarted, the sink sweeps the open batch: receipt first, then its files.
    one = _sink(tmp_path, "one")
    assert [r.stem for r in one.index.open_batches()] == [batch_stem("archive", "events", "b1")]
    # (Another cache's batch: partition ids of its own, which name no rows of cache-a.)
    fresh = await one.export_batch(_batch("b2", "cache-z", parts=1, rows=10, first_id=100), OPTS)
    assert fresh.already_held == ()
    assert not receipts[0].exists()
    # So another state directory does not take the swept partitions as written.
    two = _sink(tmp_path, "two")
    again = await two.export_batch(_batch("b3", parts=2, rows=10), OPTS)
    assert again.already_held == () and again.rows_written == 20
    ids = _row_ids(tmp_path / "out")
    assert set(ids.values()) == {1}
    await one.close()
    await two.close()


async def test_a_damaged_receipt_is_said_and_costs_a_rewrite_not_rows(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    one = _sink(tmp_path, "one")
    await one.export_batch(_batch("b1", parts=2, rows=10), OPTS)
    await one.close()
    (receipt,) = (tmp_path / "out" / RECEIPTS_DIR).rglob("*.json")
    receipt.write_text("{not json")
    two = _sink(tmp_path, "two")
    result = await two.export_batch(_batch("b2", parts=2, rows=10), OPTS)
    assert result.already_held == () and result.rows_written == 20
    assert "not a receipt" in caplog.text and str(receipt.name) in caplog.text
    await two.close()


async def test_a_sink_that_has_read_the_receipts_lists_only_recent_days(tmp_path: Path) -> None:
    one = _sink(tmp_path, "one")
    await one.export_batch(_batch("b1", parts=1, rows=5), OPTS)
    listed: list[str] = []
    real = one.store.list

    def spy(prefix: str = "") -> Any:
        listed.append(prefix)
        return real(prefix)

    one.store.list = spy  # type: ignore[method-assign]
    await one.export_batch(_batch("b2", parts=1, rows=5, first_id=50), OPTS)
    base = writer_dir("cache-a", "events")
    read = [p for p in listed if p.startswith(RECEIPTS_DIR)]
    today = datetime.now(UTC).date()
    assert read == day_prefixes("cache-a", "events", today, today)
    assert all(p.startswith(base + "/") for p in read) and len(read) == 2
    await one.close()


def test_the_index_remembers_how_far_it_read(tmp_path: Path) -> None:
    with BatchIndex(tmp_path / INDEX_FILE) as index:
        assert index.receipts_read("c", "file:///x", "events") is None
        index.read_receipts("c", "file:///x", "events", [], date(2026, 1, 2))
        assert index.receipts_read("c", "file:///x", "events") == date(2026, 1, 2)
        assert index.receipts_read("c", "file:///y", "events") is None


@given(
    partitions=st.lists(st.text(min_size=1, max_size=12), max_size=5),
    writer=st.text(min_size=1, max_size=20),
)
def test_a_receipt_round_trips(partitions: list[str], writer: str) -> None:
    receipt = Receipt(writer, "events", "part-1", "b", "s", tuple(partitions), "2026-01-01")
    assert Receipt.decode(receipt.encode(), "r.json") == receipt


@pytest.mark.parametrize(
    "data",
    [b"", b"[]", b'{"format": 2}', b'{"format": 1, "partitions": "p"}', b'{"format": 1}'],
)
def test_what_is_not_a_receipt_is_a_receipt_error(data: bytes) -> None:
    with pytest.raises(ReceiptError, match=r"r\.json"):
        Receipt.decode(data, "r.json")


@given(
    since=st.dates(min_value=date(2020, 1, 1), max_value=date(2030, 1, 1)),
    today=st.dates(min_value=date(2020, 1, 1), max_value=date(2030, 1, 1)),
)
def test_day_prefixes_cover_the_day_before_through_today(since: date, today: date) -> None:
    prefixes = day_prefixes("w", "d", since, today)
    days = [date.fromisoformat(p.rpartition("/")[2]) for p in prefixes]
    assert days == sorted(days) and days[-1] == today
    assert days[0] <= since and (days[0] - min(since, today)).days == -1
    assert all((b - a).days == 1 for a, b in itertools.pairwise(days))


def _cloud(peer: str, request: pytest.FixtureRequest, prefix: str) -> tuple[str, dict[str, Any]]:
    if peer == "s3":
        s3 = request.getfixturevalue("moto_s3")
        return "@hypaware/s3", {
            "bucket": s3.bucket,
            "prefix": prefix,
            "endpoint": s3.endpoint,
            "region": s3.region,
            "access_key_id": s3.access_key_id,
            "secret_access_key": s3.secret_access_key,
        }
    if peer == "gcs":
        gcs = request.getfixturevalue("gcs_server")
        return "@hypaware/gcs", {
            "bucket": gcs.bucket,
            "endpoint": gcs.endpoint,
            "bearer_token": str(gcs.token),
            "prefix": prefix,
        }
    az = request.getfixturevalue("azurite")
    return "@hypaware/azure", {
        "account": az.account,
        "container": az.container,
        "account_key": az.account_key,
        "endpoint": az.endpoint,
        "prefix": prefix,
    }


@pytest.mark.parametrize(
    "peer",
    [
        pytest.param("s3", marks=pytest.mark.s3),
        pytest.param("gcs", marks=pytest.mark.gcs),
        pytest.param("azure", marks=pytest.mark.azure),
    ],
)
async def test_receipts_hold_on_every_object_store(
    peer: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    destination, config = _cloud(peer, request, f"receipts-{tmp_path.name}")
    one = build(tmp_path / "one", destination, **config)
    two = build(tmp_path / "two", destination, **config)
    assert one.index.path != two.index.path
    await one.export_batch(_batch("b1", parts=2, rows=10), OPTS)
    second = await two.export_batch(_batch("b2", parts=3, rows=10), OPTS)
    assert sorted(second.already_held) == ["events-p0", "events-p1"]
    assert second.rows_written == 10
    paths = [m.path async for m in two.store.list(RECEIPTS_DIR)]
    assert len(paths) == 2
    await one.close()
    await two.close()
