"""Resolving and building ``@hypaware/format-iceberg``: encoders, catalog keys, the extra."""

from __future__ import annotations

import builtins
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import hypaware
from hypaware.core.errors import ConfigError, PluginError
from hypaware.core.resolver import BuildContext
from hypaware.core.secrets import Secret
from hypaware.iceberg.catalog import catalog_properties, describe_catalog, open_catalog
from hypaware.plugins.format_iceberg import MANIFEST, CatalogConfig, IcebergConfig

from .helpers import build_sink, sink_config

pytestmark = pytest.mark.iceberg


def _resolve(tmp_path: Path, **config: Any) -> hypaware.BlobPlan:
    (plan,) = hypaware.resolve(sink_config(tmp_path, **config))
    assert isinstance(plan, hypaware.BlobPlan)
    return plan


def test_the_resolver_gives_it_the_parquet_encoder(tmp_path: Path) -> None:
    plan = _resolve(tmp_path)
    assert plan.encoder.name == "@hypaware/format-parquet"
    assert plan.queryable
    assert plan.describe() == (
        "@hypaware/format-iceberg on @hypaware/local-fs (encoder @hypaware/format-parquet)"
    )
    assert MANIFEST.encoders == ("@hypaware/format-parquet",)


def test_jsonl_is_rejected_with_a_clear_message(tmp_path: Path) -> None:
    doc = sink_config(tmp_path)
    doc["sinks"]["archive"]["encoder"] = "@hypaware/format-jsonl"
    with pytest.raises(ConfigError) as info:
        hypaware.resolve(doc)
    text = str(info.value)
    assert "sinks.archive.encoder" in text
    assert "@hypaware/format-iceberg cannot write with encoder @hypaware/format-jsonl" in text
    assert "it accepts @hypaware/format-parquet" in text


def test_target_file_size_reaches_the_encoder_too(tmp_path: Path) -> None:
    plan = _resolve(tmp_path, target_file_size=1024)
    assert plan.writer.config.target_file_size == 1024
    assert plan.encoder.config.target_file_size == 1024


def test_nested_catalog_config_is_structured_and_checked(tmp_path: Path) -> None:
    plan = _resolve(
        tmp_path,
        catalog={"type": "rest", "uri": "https://cat.example", "token": "${CAT_TOKEN}"},
        namespace="analytics.raw",
    )
    config = plan.writer.config
    assert isinstance(config, IcebergConfig)
    assert config.catalog.type == "rest"
    assert config.catalog.token == Secret("${CAT_TOKEN}")
    assert config.namespace == "analytics.raw"

    with pytest.raises(ConfigError) as info:
        _resolve(tmp_path, catalog={"type": "rest", "url": "https://x"})
    assert "sinks.archive.config.catalog" in str(info.value)
    with pytest.raises(ConfigError) as info:
        _resolve(tmp_path, namespace="a..b")
    assert "sinks.archive.config.namespace" in str(info.value)


@pytest.mark.parametrize(
    ("catalog", "field"),
    [
        ({"type": "sql"}, "catalog.uri"),
        ({"type": "rest"}, "catalog.uri"),
        ({"type": "sqlite", "uri": "sqlite:///x.db"}, "catalog.uri"),
        ({"type": "sql", "uri": "sqlite:///x.db", "path": "x.db"}, "catalog.path"),
        ({"type": "sqlite", "token": "t"}, "catalog.token"),
        ({"type": "rest", "uri": "https://x", "password": "p"}, "catalog.password"),
    ],
)
def test_catalog_keys_that_do_not_go_together_are_refused_at_build(
    tmp_path: Path, catalog: dict[str, str], field: str
) -> None:
    with pytest.raises(ConfigError) as info:
        build_sink(sink_config(tmp_path, catalog=catalog))
    assert f"sinks.archive.config.{field}" in str(info.value)


def test_catalog_properties_reveal_secrets_only_to_pyiceberg(tmp_path: Path) -> None:
    ctx = BuildContext("archive", tmp_path / "state", tmp_path, env={"PW": "s3cret", "TOK": "t0k"})
    sql = CatalogConfig(
        type="sql", uri="postgresql://hyp@db.example/iceberg", password=Secret("${PW}")
    )
    props = catalog_properties(sql, ctx, token="root-1", warehouse_url="s3://b/p")
    assert props["uri"] == "postgresql://hyp:s3cret@db.example/iceberg"
    assert props["warehouse"] == "s3://b/p"
    assert props["py-io-impl"] == "hypaware.iceberg.fileio.ObstoreFileIO"
    assert "s3cret" not in describe_catalog(sql, ctx)

    rest = CatalogConfig(
        type="rest", uri="https://cat.example", token=Secret("${TOK}"), warehouse="wh"
    )
    props = catalog_properties(rest, ctx, token="root-1", warehouse_url="s3://b/p")
    assert props["token"] == "t0k"
    assert props["warehouse"] == "wh"
    assert "t0k" not in repr(rest)

    missing = CatalogConfig(type="rest", uri="https://cat.example", token=Secret("${NOPE}"))
    with pytest.raises(ConfigError) as info:
        catalog_properties(missing, ctx, token="root-1", warehouse_url="s3://b/p")
    assert "sinks.archive.config.catalog.token" in str(info.value)

    sqlite = CatalogConfig(lock_timeout=2.5)
    props = catalog_properties(sqlite, ctx, token="root-1", warehouse_url="file:///w")
    assert props["uri"] == f"sqlite:///{tmp_path / 'state' / 'iceberg-catalog.db'}?timeout=2.5"


def test_plugin_module_import_is_light() -> None:
    code = (
        "import sys, hypaware, hypaware.plugins.format_iceberg; "
        "heavy = {'pyiceberg', 'pyarrow', 'obstore', 'sqlalchemy'} & set(sys.modules); "
        "assert not heavy, heavy"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_missing_extra_gives_an_install_hint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in list(sys.modules):
        if name.startswith(("pyiceberg", "hypaware.iceberg")):
            monkeypatch.delitem(sys.modules, name)
    real_import = builtins.__import__

    def no_pyiceberg(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "pyiceberg" or name.startswith("pyiceberg."):
            raise ModuleNotFoundError(f"No module named {name!r}", name="pyiceberg")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pyiceberg)
    with pytest.raises(PluginError) as info:
        build_sink(sink_config(tmp_path))
    assert "pip install 'hypaware[iceberg]'" in str(info.value)
    assert "sink 'archive'" in str(info.value)


def test_a_writer_that_loses_the_race_to_create_the_catalog_tables_uses_the_winners(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pyiceberg.catalog.sql import SqlCatalog, SqlCatalogBaseTable
    from sqlalchemy import create_engine

    ctx = BuildContext("archive", tmp_path / "state", tmp_path)
    config = CatalogConfig(path=str(tmp_path / "shared.db"))
    props = catalog_properties(config, ctx, token="root-1", warehouse_url="file:///w")
    real_create = SqlCatalog.create_tables
    lost = []

    def create_after_another_writer(self: SqlCatalog) -> None:
        if not lost:
            # Both writers saw no tables; the other one creates them first.
            other = create_engine(props["uri"])
            SqlCatalogBaseTable.metadata.create_all(other)
            other.dispose()
            lost.append(True)
            SqlCatalogBaseTable.metadata.create_all(self.engine, checkfirst=False)
        real_create(self)

    monkeypatch.setattr(SqlCatalog, "create_tables", create_after_another_writer)
    catalog = open_catalog(config, ctx, props)
    assert lost == [True]
    assert catalog.list_namespaces() == []
    catalog.engine.dispose()  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("maintenance", "key", "says"),
    [
        ({"schedule": "hourly"}, "maintenance.schedule", "must have 5 fields"),
        ({"schedule": "61 * * * *"}, "maintenance.schedule", "not a valid cron expression"),
        ({"keep_snapshots": 0}, "maintenance.keep_snapshots", "must be positive"),
        ({"keep_for": -1}, "maintenance.keep_for", "must not be negative"),
        ({"keep_snaphots": 5}, "config.maintenance", "extra fields found (keep_snaphots)"),
    ],
)
def test_maintenance_keys_are_checked_by_name(
    tmp_path: Path, maintenance: dict[str, Any], key: str, says: str
) -> None:
    with pytest.raises(ConfigError) as info:
        hypaware.resolve(sink_config(tmp_path, maintenance=maintenance))
    text = str(info.value)
    assert key in text and says in text, text


def test_maintenance_defaults(tmp_path: Path) -> None:
    plan = _resolve(tmp_path)
    maint = plan.writer.config.maintenance
    assert (maint.enabled, maint.schedule, maint.keep_snapshots, maint.keep_for) == (
        True,
        "0 * * * *",
        10,
        3600.0,
    )
