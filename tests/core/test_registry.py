from __future__ import annotations

from importlib import metadata
from typing import Any

import pytest

from hypaware import PluginError, PluginManifest, Registry, build, load_config, resolve

from . import fakes

NOT_A_MANIFEST = {"name": "@evil/dict"}


def fake_entry_points(*eps: metadata.EntryPoint) -> Any:
    def entry_points(group: str) -> list[metadata.EntryPoint]:
        return [ep for ep in eps if ep.group == group]

    return entry_points


def ep(name: str, value: str) -> metadata.EntryPoint:
    return metadata.EntryPoint(name=name, value=value, group="hypaware.plugins")


def test_registry_is_read_only() -> None:
    registry = fakes.registry()
    with pytest.raises(TypeError):
        registry["@x/y"] = fakes.S3  # type: ignore[index]
    assert "@hypaware/s3" in registry
    assert len(registry) == len(fakes.ALL)


def test_duplicate_names_are_refused() -> None:
    with pytest.raises(PluginError, match="@hypaware/s3 is registered twice"):
        Registry([fakes.S3, fakes.S3])
    with pytest.raises(PluginError, match="registered twice"):
        fakes.registry().with_plugins(fakes.S3)


def test_with_plugins_returns_a_new_registry() -> None:
    base = Registry([fakes.S3])
    more = base.with_plugins(fakes.PARQUET)
    assert list(base) == ["@hypaware/s3"]
    assert set(more) == {"@hypaware/s3", "@hypaware/format-parquet"}


def test_lookup_suggests_a_name() -> None:
    with pytest.raises(PluginError, match="did you mean '@hypaware/s3'"):
        fakes.registry().lookup("@hypaware/s4")


def test_entry_point_that_is_not_a_manifest_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        metadata,
        "entry_points",
        fake_entry_points(
            ep("@hypaware/s3", "tests.core.fakes:S3"),
            ep("@evil/dict", "tests.core.test_registry:NOT_A_MANIFEST"),
            ep("@evil/missing", "tests.core.no_such_module:X"),
        ),
    )
    with pytest.raises(PluginError) as exc:
        Registry.from_entry_points()
    text = str(exc.value)
    assert "'@evil/dict'" in text and "is a dict, not a PluginManifest" in text
    assert "'@evil/missing'" in text and "cannot be loaded" in text
    assert "@hypaware/s3" not in text


def test_entry_point_name_must_match_manifest(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        metadata, "entry_points", fake_entry_points(ep("@hypaware/s33", "tests.core.fakes:S3"))
    )
    with pytest.raises(PluginError, match="names manifest '@hypaware/s3'; the names must match"):
        Registry.from_entry_points()


def test_two_distributions_claiming_one_name(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        metadata,
        "entry_points",
        fake_entry_points(
            ep("@hypaware/s3", "tests.core.fakes:S3"),
            ep("@hypaware/s3", "tests.core.fakes:LOCAL"),
        ),
    )
    with pytest.raises(PluginError, match="already registered"):
        Registry.from_entry_points()


def test_third_party_plugin_is_found_by_entry_point() -> None:
    registry = Registry.from_entry_points()
    manifest = registry["@acme/rowlog"]
    assert isinstance(manifest, PluginManifest)
    assert registry.origin("@acme/rowlog") == "hypaware-acme-test-plugin"


async def test_third_party_plugin_is_usable_from_config(tmp_path: Any) -> None:
    import pyarrow as pa

    from hypaware import DatasetInfo, ExportBatch, ExportOptions, PartitionRef

    config = load_config(
        {"sinks": {"log": {"plugin": "@acme/rowlog", "config": {"path": "out/rows.jsonl"}}}},
        base_dir=str(tmp_path),
    )
    (plan,) = resolve(config, Registry.from_entry_points())
    sink = build(plan, config=config)
    table = pa.table({"ts": pa.array([1, 2], pa.timestamp("us", "UTC")), "v": ["a", "b"]})
    info = DatasetInfo(name="events", schema=table.schema, time_column="ts")
    part = PartitionRef(
        id="p1",
        dataset="events",
        seq=1,
        row_count=2,
        opener=lambda: pa.RecordBatchReader.from_batches(table.schema, table.to_batches()),
    )
    batch = ExportBatch(batch_id="b1", sink="log", dataset=info, partitions=[part])
    result = await sink.export_batch(batch, ExportOptions())
    assert result.exported == ("p1",)
    assert result.rows_written == 2
    again = await sink.export_batch(batch, ExportOptions())
    assert again.exported == ("p1",) and again.rows_written == 0
    await sink.close()
    assert (tmp_path / "out" / "rows.jsonl").read_text().count("\n") == 2
