"""The Parquet encoder on its own: round trips, row groups, rollover, streaming, engines."""

from __future__ import annotations

import io
import itertools
import sys
from collections.abc import Iterator
from importlib.metadata import entry_points

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hypaware import BlobPlan, ConfigError, EncodeError, resolve
from hypaware.encoding._stream import BatchSource, row_groups
from hypaware.encoding.parquet import _BUFFER_BYTES, ParquetConfig, ParquetEncoder
from hypaware.plugins import format_parquet

from .data import FLAT_COLUMNS, RICH_SCHEMA, registry, rich_rows


def encode_all(
    encoder: ParquetEncoder, schema: pa.Schema, batches: list[pa.RecordBatch]
) -> list[bytes]:
    return [b"".join(chunks) for chunks in encoder.encode(schema, batches)]


def read(files: list[bytes]) -> pa.Table:
    return pa.concat_tables(pq.read_table(io.BytesIO(f)) for f in files)


def test_round_trip_keeps_every_type_and_value() -> None:
    batches = [rich_rows(i, 40) for i in range(0, 200, 40)]
    files = encode_all(ParquetEncoder(), RICH_SCHEMA, batches)
    assert len(files) == 1
    table = read(files)
    assert table.schema.equals(RICH_SCHEMA)
    assert table.equals(pa.Table.from_batches(batches))


def test_defaults_are_zstd_with_dictionary_and_statistics() -> None:
    files = encode_all(ParquetEncoder(), RICH_SCHEMA, [rich_rows(0, 50)])
    meta = pq.ParquetFile(io.BytesIO(files[0])).metadata
    column = meta.row_group(0).column(RICH_SCHEMA.get_field_index("name"))
    assert column.compression == "ZSTD"
    assert column.statistics is not None and column.statistics.has_min_max
    assert any("DICTIONARY" in enc or "RLE_DICTIONARY" in enc for enc in column.encodings)


@pytest.mark.parametrize("codec", ["snappy", "gzip", "brotli", "lz4", "none"])
def test_compression_is_configurable(codec: str) -> None:
    config = ParquetConfig(compression=codec)  # type: ignore[arg-type]
    files = encode_all(ParquetEncoder(config), RICH_SCHEMA, [rich_rows(0, 30)])
    column = pq.ParquetFile(io.BytesIO(files[0])).metadata.row_group(0).column(0)
    assert column.compression == ("UNCOMPRESSED" if codec == "none" else codec.upper())
    assert read(files).equals(pa.Table.from_batches([rich_rows(0, 30)]))


def test_row_groups_are_gathered_across_small_batches_and_split_in_big_ones() -> None:
    config = ParquetConfig(row_group_size=100)
    batches = [rich_rows(i, 30) for i in range(0, 300, 30)] + [rich_rows(300, 250)]
    files = encode_all(ParquetEncoder(config), RICH_SCHEMA, batches)
    meta = pq.ParquetFile(io.BytesIO(files[0])).metadata
    sizes = [meta.row_group(i).num_rows for i in range(meta.num_row_groups)]
    assert sizes == [100, 100, 100, 100, 100, 50]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.integers(1, 40), max_size=8), st.integers(1, 50))
def test_between_runs_only_when_a_group_follows_another(sizes: list[int], max_rows: int) -> None:
    # The encoder hands freed memory back there: a file of one group must not pay for it.
    source = BatchSource(RICH_SCHEMA, [rich_rows(0, n) for n in sizes])
    events: list[str] = []
    for group in row_groups(
        source, max_rows=max_rows, max_bytes=2**40, between=lambda: events.append("between")
    ):
        events.append(f"group {sum(b.num_rows for b in group)}")
    groups = [e for e in events if e.startswith("group")]
    assert events == [x for g in groups for x in ("between", g)][1:]
    assert sum(int(g.split()[1]) for g in groups) == sum(sizes)


def test_files_roll_over_at_the_target_size_and_lose_no_row() -> None:
    config = ParquetConfig(row_group_size=50, target_file_size=8_000)
    batches = [rich_rows(i, 70) for i in range(0, 1400, 70)]
    files = encode_all(ParquetEncoder(config), RICH_SCHEMA, batches)
    assert len(files) > 2
    for data in files[:-1]:
        # A file closes after the row group that reaches the target.
        assert len(data) >= 8_000
        assert pq.ParquetFile(io.BytesIO(data)).metadata.num_row_groups >= 1
    assert read(files).equals(pa.Table.from_batches(batches))


def test_empty_input_makes_no_file() -> None:
    empty = rich_rows(0, 0)
    assert encode_all(ParquetEncoder(), RICH_SCHEMA, []) == []
    assert encode_all(ParquetEncoder(), RICH_SCHEMA, [empty, empty]) == []


def test_field_ids_and_metadata_are_kept() -> None:
    schema = pa.schema(
        [
            pa.field("id", pa.int64(), metadata={"PARQUET:field_id": "1", "doc": "the id"}),
            pa.field("ts", pa.timestamp("us", tz="UTC"), metadata={"PARQUET:field_id": "2"}),
        ],
        metadata={"owner": "tests"},
    )
    plain = pa.record_batch(
        [pa.array([1, 2]), pa.array([0, 1], pa.timestamp("us", tz="UTC"))], names=["id", "ts"]
    )
    files = encode_all(ParquetEncoder(), schema, [plain])
    parquet_file = pq.ParquetFile(io.BytesIO(files[0]))
    text = str(parquet_file.schema)
    assert "field_id=1 id" in text and "field_id=2 ts" in text
    back = parquet_file.schema_arrow
    assert back.field("id").metadata == {b"PARQUET:field_id": b"1", b"doc": b"the id"}
    assert back.metadata is not None and back.metadata[b"owner"] == b"tests"


def test_batches_of_another_but_castable_type_are_cast() -> None:
    schema = pa.schema([("n", pa.int64())])
    narrow = pa.record_batch([pa.array([1, 2], pa.int32())], names=["n"])
    table = read(encode_all(ParquetEncoder(), schema, [narrow]))
    assert table.schema == schema and table.column("n").to_pylist() == [1, 2]


def test_mismatched_batches_raise_encode_error_naming_columns() -> None:
    schema = pa.schema([("n", pa.int64())])
    other = pa.record_batch([pa.array(["x"])], names=["m"])
    with pytest.raises(EncodeError, match=r"\['m'\].*\['n'\]"):
        encode_all(ParquetEncoder(), schema, [other])
    words = pa.record_batch([pa.array(["x"])], names=["n"])
    with pytest.raises(EncodeError, match="n"):
        encode_all(ParquetEncoder(), schema, [words])


def test_a_file_must_be_read_to_the_end_before_the_next() -> None:
    config = ParquetConfig(row_group_size=10, target_file_size=1)
    files = ParquetEncoder(config).encode(RICH_SCHEMA, [rich_rows(i, 10) for i in range(0, 50, 10)])
    first = next(files)
    next(first)
    with pytest.raises(EncodeError, match="not read to the end"):
        next(files)


class PullCounter:
    """A generator of fresh batches that records how far the consumer pulled it."""

    def __init__(self, batches: int, rows: int) -> None:
        self.batches = batches
        self.rows = rows
        self.pulled = 0
        self.max_allocated = 0

    def __iter__(self) -> Iterator[pa.RecordBatch]:
        for i in range(self.batches):
            self.max_allocated = max(self.max_allocated, pa.total_allocated_bytes())
            self.pulled += 1
            yield rich_rows(i * self.rows, self.rows)


def test_encoder_streams_instead_of_materialising_the_input() -> None:
    source = PullCounter(batches=600, rows=100)
    config = ParquetConfig(row_group_size=200)
    baseline = pa.total_allocated_bytes()
    pulled_at_output: list[int] = []
    total_rows = 0
    for chunks in ParquetEncoder(config).encode(RICH_SCHEMA, source):
        data = bytearray()
        for chunk in chunks:
            data += chunk
            pulled_at_output.append(source.pulled)
        total_rows += pq.ParquetFile(io.BytesIO(bytes(data))).metadata.num_rows
    assert total_rows == 600 * 100
    # The first row group (two batches) is out before the third batch is
    # pulled: nothing waits for the end of the input.
    assert pulled_at_output[0] == 2
    # Output keeps pace with input all the way through.
    assert len(pulled_at_output) >= 100
    assert all(b - a <= 3 for a, b in itertools.pairwise(pulled_at_output))
    # Arrow memory stays around a row group plus the writer's output buffer
    # (a fixed size), far below the whole input.
    whole_input = sum(rich_rows(0, 100).nbytes for _ in range(600))
    assert source.max_allocated - baseline < _BUFFER_BYTES + whole_input / 30


def test_the_writers_small_writes_reach_python_gathered(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every write into the Python sink takes the interpreter lock; the native
    # writer makes several per column and row group (headers, pages), so they
    # are gathered first: here, with row groups far under a MiB, one write per
    # row group (and the footer), not one per page.
    from hypaware.encoding._stream import ChunkSink

    writes = 0
    original = ChunkSink.write

    def counted(self: ChunkSink, data: bytes | bytearray | memoryview) -> int:
        nonlocal writes
        writes += 1
        return original(self, data)

    monkeypatch.setattr(ChunkSink, "write", counted)
    batches = [rich_rows(i, 500) for i in range(0, 10_000, 500)]
    files = encode_all(ParquetEncoder(ParquetConfig(row_group_size=500)), RICH_SCHEMA, batches)
    meta = pq.ParquetFile(io.BytesIO(files[0])).metadata
    assert (len(files), meta.num_row_groups, meta.num_rows) == (1, 20, 10_000)
    assert writes <= meta.num_row_groups + 2, writes


def test_row_group_bytes_bound_a_row_group_of_wide_rows() -> None:
    config = ParquetConfig(row_group_size=1_000_000, row_group_bytes=20_000)
    batches = [rich_rows(i, 50) for i in range(0, 1000, 50)]
    files = encode_all(ParquetEncoder(config), RICH_SCHEMA, batches)
    assert pq.ParquetFile(io.BytesIO(files[0])).metadata.num_row_groups > 3
    assert read(files).equals(pa.Table.from_batches(batches))


# ------------------------------------------------------------------ engine


def test_pyarrow_files_read_back_with_fastparquet() -> None:
    import fastparquet

    schema = pa.schema([RICH_SCHEMA.field(c) for c in FLAT_COLUMNS])
    batches = [rich_rows(i, 40).select(schema.names) for i in range(0, 200, 40)]
    config = ParquetConfig(row_group_size=64, target_file_size=6_000)
    files = encode_all(ParquetEncoder(config), schema, batches)
    assert len(files) > 1
    frames = [fastparquet.ParquetFile(io.BytesIO(f)).to_pandas() for f in files]
    assert sum(len(f) for f in frames) == 200
    assert [int(v) for f in frames for v in f["row_id"]] == list(range(200))


def test_the_dropped_fastparquet_engine_is_refused_with_the_reason() -> None:
    base = {"writer": "@hypaware/format-parquet", "destination": "@hypaware/memory"}
    for value, reason in (("fastparquet", "no longer offered"), ("arrow", 'must be "pyarrow"')):
        config = {"sinks": {"a": {**base, "config": {"engine": value}}}}
        with pytest.raises(ConfigError) as info:
            resolve(config, registry())
        assert "sinks.a.config.engine" in str(info.value)
        assert reason in str(info.value)
    with pytest.raises(ValueError, match="no longer offered"):
        ParquetConfig(engine="fastparquet")


# ------------------------------------------------------------------ plugin and config


def test_manifest_declares_a_queryable_encoder_needing_a_blob_store() -> None:
    manifest = format_parquet.MANIFEST
    assert manifest.kind == "encoder"
    assert manifest.queryable
    assert "hypaware.blob-store" in manifest.requires
    (entry,) = [
        ep for ep in entry_points(group="hypaware.plugins") if ep.name == "@hypaware/format-parquet"
    ]
    assert entry.load() is manifest


def test_config_keys_are_checked_by_the_resolver() -> None:
    base = {"writer": "@hypaware/format-parquet", "destination": "@hypaware/memory"}
    config = {
        "sinks": {
            "a": {**base, "config": {"compression": "zip", "row_group_size": 0, "engin": "x"}},
            "b": {**base, "config": {"engine": "pyarrow", "compression_level": 3}},
        }
    }
    with pytest.raises(ConfigError) as info:
        resolve(config, registry())
    text = str(info.value)
    assert "sinks.a.config.engin" in text and "did you mean 'engine'" in text
    config["sinks"].pop("a")
    (plan,) = resolve(config, registry())
    assert plan.queryable
    assert isinstance(plan, BlobPlan)
    assert plan.encoder.config == ParquetConfig(engine="pyarrow", compression_level=3)
    for key, value in (("compression", "zip"), ("row_group_size", 0), ("dictionary", "yes")):
        bad = {"sinks": {"a": {**base, "config": {key: value}}}}
        with pytest.raises(ConfigError) as info:
            resolve(bad, registry())
        assert [p.path for p in info.value.problems] == [f"sinks.a.config.{key}"]


def test_importing_the_plugin_module_does_not_import_pyarrow() -> None:
    import subprocess

    code = (
        "import sys, hypaware.plugins.format_parquet, hypaware.plugins.format_jsonl;"
        "print('pyarrow' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
