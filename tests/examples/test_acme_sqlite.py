"""The example third-party package, installed beside hypaware and driven from a config file.

nox installs ``./examples/acme-sqlite`` into the test environment, the way a
user would install a plugin package.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.ipc as ipc
import pytest

from hypaware import (
    DatasetInfo,
    ExportBatch,
    ExportOptions,
    HypawareConfig,
    Registry,
    build,
    load_config,
    resolve,
)
from hypaware.cache.local import LocalCache
from hypaware.cli import main
from hypaware.export.driver import ExportDriver

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "acme-sqlite"

pytest.importorskip(
    "hypaware_example_sqlite",
    reason="install the example package: pip install -e ./examples/acme-sqlite",
)

from hypaware_example_sqlite.sqlite_sink import read_table  # noqa: E402

SCHEMA = pa.schema(
    [
        ("ts", pa.timestamp("us", tz="UTC")),
        ("conversation", pa.string()),
        ("tokens", pa.int64()),
    ]
)
START = datetime(2026, 1, 5, 8, tzinfo=UTC)


@pytest.fixture
def config_file(tmp_path: Path) -> Path:
    path = tmp_path / "hypaware.json"
    shutil.copy(EXAMPLE / "hypaware.json", path)
    return path


def fill_cache(config: HypawareConfig, rows: int) -> list[dict[str, object]]:
    cache = LocalCache.from_config(config)
    cache.define_dataset(
        DatasetInfo(name="calls", schema=SCHEMA, time_column="ts", lookup_key="conversation")
    )
    data = [
        {"ts": START + timedelta(minutes=n), "conversation": f"c{n % 3}", "tokens": n}
        for n in range(rows)
    ]
    cache.append("calls", data)
    cache.seal("calls")
    return data


def test_plugins_lists_the_sink_and_the_encoder(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins"]) == 0
    lines = {line.split()[0]: line.split() for line in capsys.readouterr().out.splitlines()}
    assert lines["@acme/sqlite"][1:3] == ["sink", "hypaware.sink"]
    assert lines["@acme/sqlite"][-1] == "hypaware-example-sqlite"
    assert lines["@acme/arrow-ipc"][1:4] == ["encoder", "hypaware.encoder", "hypaware.blob-store"]
    assert lines["@acme/arrow-ipc"][-1] == "hypaware-example-sqlite"


def test_check_config_passes(config_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check-config", str(config_file)]) == 0
    out = capsys.readouterr().out
    assert "arrow: blob sink, @acme/arrow-ipc on @hypaware/local-fs, schedule '0 * * * *'" in out
    assert "ledger: request sink, @acme/sqlite, schedule '*/5 * * * *'" in out


def test_check_config_names_a_mistyped_key(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads((EXAMPLE / "hypaware.json").read_text())
    doc["sinks"]["ledger"]["config"]["table_prefx"] = "x_"
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "sinks.ledger.config.table_prefx: unknown key for @acme/sqlite" in err
    assert "did you mean 'table_prefix'?" in err


async def test_export_end_to_end_through_the_driver(config_file: Path) -> None:
    config = load_config(config_file)
    data = fill_cache(config, 50)
    driver = ExportDriver.from_config(config)
    try:
        report = await driver.run_once(backfill=True)
        assert report.ok, report
        assert report.sinks["ledger"].rows == 50
        assert report.sinks["arrow"].rows == 50
        again = await driver.run_once()
        assert again.rows == 0
    finally:
        await driver.close()

    db = config_file.parent / "export" / "acme.db"
    stored = read_table(db, "hyp_calls")
    assert sorted(r["tokens"] for r in stored) == [r["tokens"] for r in data]
    assert stored[0]["ts"] == "2026-01-05T08:00:00+00:00"

    files = sorted((config_file.parent / "export" / "arrow").rglob("*.arrow"))
    assert files
    tables = [ipc.open_file(f).read_all() for f in files]
    arrow_rows = pa.concat_tables(tables).to_pylist()
    assert sorted(r["tokens"] for r in arrow_rows) == [r["tokens"] for r in data]
    by_day = ds.dataset(
        config_file.parent / "export" / "arrow" / "calls", format="ipc", partitioning="hive"
    ).to_table(filter=ds.field("date") == "2026-01-05")
    assert by_day.num_rows == 50


async def test_query_reads_the_sqlite_sink_once_the_cache_drops_its_rows(
    config_file: Path,
) -> None:
    """`hypaware.query` over the example's queryable sink: rows the cache no longer holds."""
    import hypaware
    from hypaware.querying.api import plan_query

    config = load_config(config_file)
    data = fill_cache(config, 30)
    driver = ExportDriver.from_config(config)
    try:
        assert (await driver.run_once(backfill=True)).ok
    finally:
        await driver.close()
    cache = LocalCache.from_config(config)
    for part in cache.ready_partitions("calls"):  # as retention would, once exported
        (cache.path / "calls" / "sealed" / f"{part.id}.arrow").unlink()

    plan, reader = await plan_query(config, "calls", sink="ledger", columns=["tokens", "ts"])
    table = reader.read_all()
    assert plan.sink == "ledger" and plan.cache_partitions == []
    assert table.schema.names == ["tokens", "ts"]
    assert table.schema.field("ts").type == SCHEMA.field("ts").type
    assert sorted(table.column("tokens").to_pylist()) == [r["tokens"] for r in data]
    few = await hypaware.query_async(config, "calls", sink="ledger", where="tokens >= 25")
    assert sorted(few.read_all().column("tokens").to_pylist()) == [25, 26, 27, 28, 29]


async def test_export_through_resolve_build_and_export_batch(config_file: Path) -> None:
    config = load_config(config_file)
    fill_cache(config, 12)
    cache = LocalCache.from_config(config)
    info = cache.dataset("calls")
    parts = cache.ready_partitions("calls")
    plans = {plan.name: plan for plan in resolve(config, Registry.from_entry_points())}
    sink = build(plans["ledger"], config=config)
    try:
        batch = ExportBatch("b-1", "ledger", info, parts)
        first = await sink.export_batch(batch, ExportOptions())
        again = await sink.export_batch(batch, ExportOptions(attempt=2))
    finally:
        await sink.close()
    assert set(first.exported) == {p.id for p in parts}
    assert first.rows_written == 12
    assert set(again.exported) == {p.id for p in parts}
    assert again.rows_written == 0
    assert len(read_table(config_file.parent / "export" / "acme.db", "hyp_calls")) == 12


@pytest.mark.slow
@pytest.mark.timeout(1500)
def test_the_example_packages_own_conformance_run_passes() -> None:
    """What the package's author runs: its tests, which subclass the conformance suite."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=EXAMPLE,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        # About 1.5 minutes alone; the limit only stops a hung run, on a busy machine.
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert " passed" in proc.stdout
    assert "failed" not in proc.stdout
