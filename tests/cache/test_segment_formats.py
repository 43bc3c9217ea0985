"""Sealed segments as Arrow IPC or Parquet: every codec, mixed caches, recovery across formats."""

from __future__ import annotations

import gc
import os
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

import hypaware.cache.writes as writes
from hypaware import DatasetInfo, load_config
from hypaware.cache.local import LocalCache
from hypaware.core.errors import CacheError, ConfigError
from tests.driver.helpers import SCHEMA, make_cache, rows

COMBOS = [
    ("arrow", "lz4"),
    ("arrow", "zstd"),
    ("arrow", "none"),
    ("parquet", "snappy"),
    ("parquet", "zstd"),
    ("parquet", "lz4"),
    ("parquet", "none"),
]
# Frame magics of the codecs, as they appear in an Arrow IPC body.
MAGIC = {"lz4": b"\x04\x22\x4d\x18", "zstd": b"\x28\xb5\x2f\xfd"}


def _sorted(table: pa.Table) -> list[dict[str, object]]:
    return sorted(table.to_pylist(), key=lambda r: str(r["row_id"]))


def _sealed_files(path: Path) -> list[Path]:
    return sorted(p for p in (path / "events" / "sealed").iterdir() if not p.name.startswith("."))


@pytest.mark.parametrize(("segment_format", "codec"), COMBOS)
def test_every_format_and_codec_seals_and_reads_back_the_rows(
    tmp_path: Path, segment_format: str, codec: str
) -> None:
    cache = make_cache(tmp_path, count=0, segment_format=segment_format, compression=codec)
    data = pa.Table.from_pylist(rows(0, 60), schema=SCHEMA)
    cache.append("events", data)
    sealed = cache.seal()
    files = _sealed_files(tmp_path)
    assert files and {f.suffix for f in files} == {f".{segment_format}"}
    back = pa.concat_tables(p.open().read_all() for p in sealed)
    assert back.schema.equals(SCHEMA)
    assert _sorted(back) == _sorted(data)
    fresh = LocalCache(tmp_path, fsync=False)
    listed = fresh.ready_partitions("events")
    assert [(p.id, p.row_count, p.min_time, p.max_time) for p in listed] == [
        (p.id, p.row_count, p.min_time, p.max_time) for p in sealed
    ]
    for part in listed:
        table = part.open().read_all()
        assert table.num_rows == part.row_count
        # A whole read (native for Arrow segments) gives the same rows and schema.
        assert (part.loader is not None) == (segment_format == "arrow")
        whole = part.read_all()
        assert whole.schema.equals(SCHEMA, check_metadata=True)
        assert whole.equals(table)
        times = table.column("ts").to_pylist()
        assert (min(times), max(times)) == (part.min_time, part.max_time)
    body = files[0].read_bytes()
    if segment_format == "parquet":
        written = pq.ParquetFile(files[0]).metadata.row_group(0).column(0).compression
        assert written.lower() == ("uncompressed" if codec == "none" else codec)
    else:
        for name, magic in MAGIC.items():
            assert (magic in body) == (name == codec)


def test_defaults_are_arrow_with_lz4_and_parquet_with_snappy(tmp_path: Path) -> None:
    assert (LocalCache(tmp_path).segment_format, LocalCache(tmp_path).compression) == (
        "arrow",
        "lz4",
    )
    parquet = LocalCache(tmp_path, segment_format="parquet")
    assert parquet.compression == "snappy"


def test_a_codec_the_format_cannot_take_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"arrow segments take lz4, zstd, none, not 'snappy'"):
        LocalCache(tmp_path, compression="snappy")
    with pytest.raises(ValueError, match="segment_format must be one of arrow, parquet"):
        LocalCache(tmp_path, segment_format="orc")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match=r"cache\.compression.*not 'snappy'"):
        load_config({"cache": {"compression": "snappy"}})
    config = load_config({"cache": {"segment_format": "parquet", "compression": "snappy"}})
    assert LocalCache.from_config(config).compression == "snappy"


def test_a_cache_of_both_formats_lists_reads_and_drops_them_all(tmp_path: Path) -> None:
    old = make_cache(tmp_path, count=0, segment_format="parquet")
    old.append("events", rows(0, 30))
    first = old.seal()
    new = LocalCache(tmp_path, fsync=False, retention=None)
    new.append("events", rows(30, 30))
    second = new.seal()
    assert {f.suffix for f in _sealed_files(tmp_path)} == {".arrow", ".parquet"}
    listed = new.ready_partitions("events")
    assert [p.seq for p in listed] == list(range(1, len(first) + len(second) + 1))
    assert sum(p.open().read_all().num_rows for p in listed) == 60
    for part in (first[0], second[0]):
        found = new.partition("events", part.id)
        assert found is not None and found.row_count == part.row_count
    assert new.ready_partitions("events", after=first[-1].seq) == second
    new.max_bytes = 0  # a hard cap below everything: retention drops both kinds
    report = new.enforce_retention({})
    assert sorted(report.dropped) == sorted(f"events/{p.id}" for p in listed)
    assert _sealed_files(tmp_path) == []


def test_a_seal_cut_short_in_one_format_is_finished_in_that_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = make_cache(tmp_path, count=0, segment_format="parquet")
    old.append("events", rows(0, 12))

    def crash(_path: Path) -> None:
        raise RuntimeError("the process died after publishing its segments")

    # The segments are in place, but the claimed chunks were never released.
    monkeypatch.setattr(writes, "_unlink", crash)
    with pytest.raises(RuntimeError, match="died"):
        old.seal()
    monkeypatch.undo()
    claimed = list((tmp_path / "events" / "sealing").iterdir())
    published = _sealed_files(tmp_path)
    assert claimed and {f.suffix for f in published} == {".parquet"}
    new = LocalCache(tmp_path, fsync=False)
    new.recover()
    assert new.stats.recovered_seals == len(published)
    assert _sealed_files(tmp_path) == published  # no second segment for any seq
    assert not list((tmp_path / "events" / "sealing").iterdir())
    assert sum(p.row_count for p in new.ready_partitions("events")) == 12


def test_small_appends_are_gathered_into_few_batches(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, count=0)
    for i in range(40):
        cache.append("events", rows(i, 1, convs=1, step=1.0))
    (part,) = cache.seal()
    (segment,) = _sealed_files(tmp_path)
    with pa.memory_map(str(segment)) as source:
        assert pa.ipc.open_file(source).num_record_batches == 1
    assert part.open().read_all().column("n").to_pylist() == list(range(40))


@pytest.mark.parametrize("whole", [False, True])
def test_rows_read_stay_valid_after_the_segment_is_dropped(tmp_path: Path, whole: bool) -> None:
    # Uncompressed segments are read without a copy: the rows point into the mapping.
    cache = make_cache(tmp_path, count=0, compression="none")
    cache.append("events", rows(0, 20, convs=1, step=1.0))
    (part,) = cache.seal()
    if whole:
        table = part.read_all()
    else:
        reader = part.open()
        table = reader.read_all()
        reader.close()
        del reader
    for path in _sealed_files(tmp_path):
        os.unlink(path)
    gc.collect()
    assert table.column("n").to_pylist() == list(range(20))


@pytest.mark.parametrize("damage", ["gone", "truncated"])
def test_a_whole_read_of_a_damaged_segment_names_it(tmp_path: Path, damage: str) -> None:
    cache = make_cache(tmp_path, count=0)
    cache.append("events", rows(0, 20, convs=1, step=1.0))
    (part,) = cache.seal()
    (path,) = _sealed_files(tmp_path)
    if damage == "gone":
        path.unlink()
    else:
        path.write_bytes(path.read_bytes()[:-40])
    with pytest.raises(CacheError, match=re.escape(str(path))) as caught:
        part.read_all()
    assert ("gone" in str(caught.value)) == (damage == "gone")


def test_a_truncated_arrow_segment_is_corrupt_not_fatal(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, count=12)
    parts = cache.ready_partitions("events")
    victim = tmp_path / "events" / "sealed" / f"{parts[0].id}.arrow"
    victim.write_bytes(victim.read_bytes()[:-40])
    fresh = LocalCache(tmp_path, fsync=False)
    assert [p.id for p in fresh.ready_partitions("events")] == [p.id for p in parts[1:]]
    assert fresh.stats.corrupt_segments == 1


@given(st.lists(st.integers(min_value=0, max_value=12), max_size=12), st.integers(1, 10))
def test_gathering_keeps_every_row_in_order(sizes: list[int], limit: int) -> None:
    start = 0
    tables = []
    for size in sizes:
        tables.append(pa.table({"n": pa.array(range(start, start + size), pa.int64())}))
        start += size
    out = list(writes._gathered(tables, limit))
    joined = [n for t in out for n in t.column("n").to_pylist()]
    assert joined == list(range(start))
    for table in out:
        # A run is joined only while it fits; a table at or past the limit goes alone.
        assert table.num_rows <= limit or any(t.num_rows == table.num_rows for t in tables)


@pytest.mark.parametrize("segment_format", ["arrow", "parquet"])
def test_chunks_with_different_dictionaries_seal_into_one_segment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, segment_format: str
) -> None:
    from hypaware import DatasetInfo

    schema = pa.schema(
        [
            pa.field("k", pa.dictionary(pa.int32(), pa.string())),
            pa.field("ts", SCHEMA.field("ts").type),
        ]
    )
    info = DatasetInfo(name="events", schema=schema, time_column="ts", time_grain=None)
    cache = LocalCache(tmp_path, fsync=False, segment_format=segment_format)  # type: ignore[arg-type]
    cache.define_dataset(info)
    # Small enough to make separate batches: each append's chunk has its own dictionary.
    monkeypatch.setattr(writes, "_SEGMENT_BATCH_ROWS", 4)
    stamp = rows(0, 1)[0]["ts"]
    for value in ("a", "b", "c"):
        cache.append("events", pa.table({"k": [value] * 3, "ts": [stamp] * 3}, schema=schema))
    (part,) = cache.seal()
    back = part.open().read_all()
    assert back.column("k").to_pylist() == ["a"] * 3 + ["b"] * 3 + ["c"] * 3


def _resident_file_bytes() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("RssFile:"):
                return int(line.split()[1]) * 1024
    raise AssertionError("no RssFile in /proc/self/status")


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux /proc")
def test_streaming_a_segment_does_not_keep_its_pages_resident(tmp_path: Path) -> None:
    # A mapped segment keeps every page read in the process's resident set until
    # the reader closes: exporting a big partition looked like memory growing
    # with it. Read through, batch by batch, the file must not pile up there.
    schema = pa.schema([("ts", pa.timestamp("us", "UTC")), ("blob", pa.binary())])
    cache = LocalCache(tmp_path, fsync=False)  # LZ4: reading touches every byte of the file
    cache.define_dataset(DatasetInfo(name="big", schema=schema, time_column="ts"))
    width, count = 256, 65536
    for _ in range(3):  # three batches of a segment; random bytes do not compress
        blob = pa.py_buffer(os.urandom(width * count))
        offsets = pa.array(range(0, width * (count + 1), width), pa.int32()).buffers()[1]
        rows = pa.table(
            {
                "ts": pa.array(range(count), pa.int64()).cast(schema.field("ts").type),
                "blob": pa.Array.from_buffers(pa.binary(), count, [None, offsets, blob]),
            }
        )
        cache.append("big", rows)
    (part,) = cache.seal()
    assert part.byte_size > 40 * 2**20
    warm = part.open()
    next(iter(warm))  # imports and first-use mappings belong to "before"
    warm.close()
    before = _resident_file_bytes()
    reader = part.open()
    seen = 0
    for batch in reader:
        seen += batch.num_rows
        del batch
        growth = _resident_file_bytes() - before
        assert growth < part.byte_size / 4, f"{growth} bytes of the segment stay resident"
    reader.close()
    assert seen == part.row_count


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs Linux /proc")
def test_a_reader_dropped_unread_or_half_read_leaves_no_file_open(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, count=0)
    cache.append("events", rows(0, 20, convs=1, step=1.0))
    (part,) = cache.seal()
    gc.collect()
    before = len(os.listdir("/proc/self/fd"))
    for _ in range(20):
        part.open()  # never read
        reader = part.open()
        next(iter(reader))  # read in part, never closed
        del reader
    gc.collect()
    assert len(os.listdir("/proc/self/fd")) == before


def test_a_whole_segment_read_carries_the_datasets_schema_not_the_files(tmp_path: Path) -> None:
    from hypaware.cache.reads import _load_arrow

    path = tmp_path / "seg.arrow"
    written = pa.schema([pa.field("x", pa.int64(), metadata={b"k": b"file"})]).with_metadata(
        {b"hypaware.segment": b"{}"}
    )
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, written) as writer:
        writer.write_table(pa.table({"x": [1, 2]}, schema=written))

    same = pa.schema([pa.field("x", pa.int64(), metadata={b"k": b"file"})])
    table = _load_arrow(path, same)
    assert table.schema.equals(same, check_metadata=True)
    assert table.column("x").to_pylist() == [1, 2]

    # The dataset's own field metadata and schema metadata win over the file's.
    declared = pa.schema(
        [pa.field("x", pa.int64(), metadata={b"k": b"dataset"})], metadata={b"d": b"1"}
    )
    table = _load_arrow(path, declared)
    assert table.schema.equals(declared, check_metadata=True)
