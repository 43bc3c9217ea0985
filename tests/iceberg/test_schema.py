"""Schema evolution, and tables changed by someone else."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import LongType, StringType

from hypaware.core.types import DatasetInfo, ExportOptions

from .helpers import DATASET, SCHEMA, batch, build_sink, partition, rows_for, sink_config

pytestmark = pytest.mark.iceberg


def _dataset(schema: pa.Schema) -> DatasetInfo:
    return DatasetInfo(
        name="messages", schema=schema, time_column="ts", lookup_key="conversation_id"
    )


async def test_new_nullable_column_is_added_by_name(tmp_path: Path) -> None:
    sink = build_sink(sink_config(tmp_path))
    await sink.export_batch(batch("b1", [partition("p1", rows_for("a", 0, 3))]), ExportOptions())

    wider = pa.schema([*SCHEMA, ("model", pa.string())])
    rows = [dict(r, model="m-1") for r in rows_for("b", 0, 2)]
    result = await sink.export_batch(
        batch("b2", [partition("p2", rows, schema=wider)], dataset=_dataset(wider)),
        ExportOptions(),
    )

    assert result.exported == ("p2",)
    table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert isinstance(table.schema().find_field("model").field_type, StringType)
    assert not table.schema().find_field("model").required
    got = table.scan().to_arrow().to_pylist()
    assert sorted((r["conversation_id"], r["model"]) for r in got) == [
        ("a", None),
        ("a", None),
        ("a", None),
        ("b", "m-1"),
        ("b", "m-1"),
    ]
    await sink.close()


async def test_narrower_type_is_written_into_the_wider_column(tmp_path: Path) -> None:
    sink = build_sink(sink_config(tmp_path))
    await sink.export_batch(batch("b1", [partition("p1", rows_for("a", 0, 3))]), ExportOptions())
    narrow = pa.schema(
        [f if f.name != "tokens" else pa.field("tokens", pa.int32()) for f in SCHEMA]
    )
    result = await sink.export_batch(
        batch(
            "b2", [partition("p2", rows_for("b", 0, 2), schema=narrow)], dataset=_dataset(narrow)
        ),
        ExportOptions(),
    )
    assert result.exported == ("p2",)
    table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert isinstance(table.schema().find_field("tokens").field_type, LongType)
    assert table.scan().to_arrow().num_rows == 5
    await sink.close()


async def test_incompatible_type_change_is_a_clear_error_and_holds_partitions(
    tmp_path: Path,
) -> None:
    sink = build_sink(sink_config(tmp_path))
    await sink.export_batch(batch("b1", [partition("p1", rows_for("a", 0, 3))]), ExportOptions())
    changed = pa.schema(
        [f if f.name != "tokens" else pa.field("tokens", pa.string()) for f in SCHEMA]
    )
    rows = [dict(r, tokens=str(r["tokens"])) for r in rows_for("b", 0, 2)]

    result = await sink.export_batch(
        batch("b2", [partition("p2", rows, schema=changed)], dataset=_dataset(changed)),
        ExportOptions(),
    )

    assert result.exported == ()
    (retry,) = result.retry_partitions
    assert retry.partition_id == "p2"
    assert not retry.retryable
    for part in ("sink 'archive'", "dataset 'messages'", "table hyp.messages", "'tokens'"):
        assert part in retry.reason
    assert "long" in retry.reason
    assert "string" in retry.reason
    table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert len(table.metadata.snapshots) == 1
    await sink.close()


async def test_table_repartitioned_by_someone_else_is_refused(tmp_path: Path) -> None:
    sink = build_sink(sink_config(tmp_path))
    await sink.export_batch(batch("b1", [partition("p1", rows_for("a", 0, 3))]), ExportOptions())
    table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    with table.update_spec() as spec:
        spec.remove_field("ts_day")
        spec.add_field("conversation_id", IdentityTransform(), "conv")

    result = await sink.export_batch(
        batch("b2", [partition("p2", rows_for("b", 0, 2))]), ExportOptions()
    )

    (retry,) = result.retry_partitions
    assert not retry.retryable
    assert "table hyp.messages" in retry.reason
    assert "not by day(ts)" in retry.reason
    table.refresh()
    assert len(table.metadata.snapshots) == 1
    await sink.close()


async def test_rows_whose_values_do_not_fit_are_reported_per_partition(tmp_path: Path) -> None:
    schema = pa.schema([*SCHEMA, ("big", pa.uint64())])
    dataset = _dataset(schema)
    sink = build_sink(sink_config(tmp_path))
    good = partition("good", [dict(r, big=1) for r in rows_for("a", 0, 2)], schema=schema)
    bad = partition("bad", [dict(r, big=2**63 + 5) for r in rows_for("b", 0, 2)], schema=schema)

    result = await sink.export_batch(batch("b", [good, bad], dataset=dataset), ExportOptions())

    assert result.exported == ("good",)
    (retry,) = result.retry_partitions
    assert retry.partition_id == "bad"
    assert not retry.retryable
    assert "'big'" in retry.reason
    await sink.close()


async def test_time_column_that_is_not_a_time_is_refused_at_registration(tmp_path: Path) -> None:
    schema = pa.schema([("ts", pa.string()), ("conversation_id", pa.string())])
    dataset = DatasetInfo(name="odd", schema=schema, time_column="ts", lookup_key="conversation_id")
    sink = build_sink(sink_config(tmp_path))
    part = partition(
        "p", [{"ts": "yesterday", "conversation_id": "a"}], schema=schema, dataset="odd"
    )

    result = await sink.export_batch(batch("b", [part], dataset=dataset), ExportOptions())

    (retry,) = result.retry_partitions
    assert not retry.retryable
    assert "table hyp.odd" in retry.reason
    assert "not a timestamp or date" in retry.reason
    await sink.close()


async def test_nested_columns_round_trip_with_field_ids(tmp_path: Path) -> None:
    item = pa.struct([("name", pa.string()), ("score", pa.float64())])
    schema = pa.schema(
        [
            *SCHEMA,
            ("tags", pa.list_(pa.string())),
            ("tools", pa.list_(item)),
            ("attrs", pa.map_(pa.string(), pa.int64())),
        ]
    )
    rows = [
        dict(r, tags=["a", "b"], tools=[{"name": "t", "score": 0.5}], attrs=[("k", 1)])
        for r in rows_for("n", 0, 3)
    ]
    sink = build_sink(sink_config(tmp_path))
    result = await sink.export_batch(
        batch("b", [partition("p", rows, schema=schema)], dataset=_dataset(schema)),
        ExportOptions(),
    )
    assert result.exported == ("p",), result
    table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    got = table.scan().to_arrow().to_pylist()
    assert [r["tags"] for r in got] == [["a", "b"]] * 3
    assert [r["tools"] for r in got] == [[{"name": "t", "score": 0.5}]] * 3
    assert [r["attrs"] for r in got] == [[("k", 1)]] * 3
    # Column statistics were mapped to nested field ids.
    (task,) = table.scan().plan_files()
    name_id = table.schema().find_field("tools.element.name").field_id
    assert name_id in task.file.value_counts
    await sink.close()


async def test_table_column_is_widened_when_the_dataset_widens(tmp_path: Path) -> None:
    narrow = pa.schema(
        [f if f.name != "tokens" else pa.field("tokens", pa.int32()) for f in SCHEMA]
    )
    sink = build_sink(sink_config(tmp_path))
    await sink.export_batch(
        batch(
            "b1", [partition("p1", rows_for("a", 0, 2), schema=narrow)], dataset=_dataset(narrow)
        ),
        ExportOptions(),
    )
    table = sink.table.load_table(DATASET)  # type: ignore[attr-defined]
    assert not isinstance(table.schema().find_field("tokens").field_type, LongType)

    big = [dict(r, tokens=2**40 + i) for i, r in enumerate(rows_for("b", 0, 2))]
    result = await sink.export_batch(batch("b2", [partition("p2", big)]), ExportOptions())

    assert result.exported == ("p2",)
    table.refresh()
    assert isinstance(table.schema().find_field("tokens").field_type, LongType)
    got = sorted(r["tokens"] for r in table.scan().to_arrow().to_pylist())
    assert got == [0, 1, 2**40, 2**40 + 1]
    await sink.close()
