"""The example plugins against hypaware's conformance suite.

This is all a plugin author writes to run the suite: how to build the sink
under test on a fresh target, and how to read a dataset's rows back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.ipc as ipc
import pytest
from hypaware_example_sqlite.arrow_ipc import ArrowIpcEncoder
from hypaware_example_sqlite.sqlite_sink import SqliteSink, read_table

from hypaware import (
    DatasetInfo,
    ExportBatch,
    ExportOptions,
    Registry,
    Sink,
    build,
    load_config,
    resolve,
)
from hypaware.plugin import encode_segment
from hypaware.testing.conformance import EncoderContract, QueryableSinkContract, SinkContract


def build_one(target: Path, sink: dict[str, Any]) -> Sink:
    """Build a sink the way hypaware does: from a config, through the installed plugins."""
    config = load_config({"sinks": {"under-test": sink}}, base_dir=str(target))
    (plan,) = resolve(config, Registry.from_entry_points())
    return build(plan, config=config)


class TestSqliteSink(QueryableSinkContract):
    def make_sink(self, target: Path) -> Sink:
        sink = build_one(target, {"plugin": "@acme/sqlite", "config": {"path": "db/acme.db"}})
        assert isinstance(sink, SqliteSink)
        return sink

    def read_rows(self, target: Path, dataset: DatasetInfo) -> list[dict[str, Any]]:
        return read_table(target / "db" / "acme.db", dataset.name)

    def local_root(self, target: Path) -> Path:
        return target / "db"

    # A test of its own next to the suite's, using the suite's sample batch.
    @pytest.mark.asyncio
    async def test_table_prefix_names_the_table(
        self, target: Path, contract_batch: ExportBatch
    ) -> None:
        sink = build_one(
            target, {"plugin": "@acme/sqlite", "config": {"path": "p.db", "table_prefix": "t_"}}
        )
        try:
            result = await sink.export_batch(contract_batch, ExportOptions())
        finally:
            await sink.close()
        assert result.rows_written == contract_batch.row_count == 16
        assert len(read_table(target / "p.db", "t_extra")) == 16


class TestArrowIpcOnLocalFs(SinkContract):
    """The encoder inside hypaware's own blob sink, on the local-fs destination."""

    def make_sink(self, target: Path) -> Sink:
        return build_one(
            target,
            {
                "writer": "@acme/arrow-ipc",
                "destination": "@hypaware/local-fs",
                "config": {"root": "out", "compression": "zstd"},
            },
        )

    def read_rows(self, target: Path, dataset: DatasetInfo) -> list[dict[str, Any]]:
        rows: list[dict[str, Any]] = []
        for path in sorted((target / "out" / encode_segment(dataset.name)).rglob("*.arrow")):
            with ipc.open_file(path) as reader:
                rows.extend(reader.read_all().to_pylist())
        return rows

    def local_root(self, target: Path) -> Path:
        return target / "out"


class TestArrowIpcEncoder(EncoderContract):
    """The encoder alone: rollover, streaming, file order, errors; read back by pyarrow.ipc."""

    reader = "pyarrow.ipc.open_file"

    def make_encoder(self, target_size: int) -> ArrowIpcEncoder:
        return ArrowIpcEncoder(None, target_size)

    def read_file(self, data: bytes) -> pa.Table:
        with ipc.open_file(pa.BufferReader(data)) as reader:
            return reader.read_all()

    def unrepresentable(self) -> tuple[pa.Schema, list[pa.RecordBatch]]:
        # A batch whose columns are not the file's schema cannot go in the file.
        schema = pa.schema([pa.field("n", pa.int64())])
        return schema, [pa.record_batch([pa.array(["x"])], names=["n"])]
