"""Maintenance through the driver: on the sink's schedule, in the report, status, observer, CLI."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hypaware import DatasetInfo, ExportDriver, load_config
from hypaware.cache.local import LocalCache
from hypaware.cli import main
from hypaware.cli.status import collect_status
from hypaware.export.observer import CountingObserver
from hypaware.iceberg.compact import live_files
from tests.driver.helpers import ManualClock

pytestmark = pytest.mark.iceberg

SCHEMA = pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("k", pa.string()), ("n", pa.int64())])
INFO = DatasetInfo(name="events", schema=SCHEMA, time_column="ts", lookup_key="k")
T0 = datetime(2026, 5, 1, 20, 0, tzinfo=UTC)


def _document(root: Path, **maintenance: Any) -> dict[str, Any]:
    return {
        "state_dir": str(root / "state"),
        "cache": {"path": str(root / "cache")},
        "sinks": {
            "lake": {
                "writer": "@hypaware/format-iceberg",
                "destination": "@hypaware/local-fs",
                "config": {"root": str(root / "out"), "maintenance": maintenance},
            }
        },
    }


def _rows(at: datetime, n0: int, count: int = 5) -> pa.Table:
    return pa.table(
        {
            "ts": [at + timedelta(seconds=k) for k in range(count)],
            "k": [f"k{(n0 + k) % 3}" for k in range(count)],
            "n": list(range(n0, n0 + count)),
        },
        schema=SCHEMA,
    )


async def test_the_driver_maintains_on_the_schedule_and_says_so(tmp_path: Path) -> None:
    document = _document(tmp_path, schedule="0 */2 * * *", keep_for=0, keep_snapshots=2)
    (tmp_path / "hypaware.json").write_text(json.dumps(document))
    cache = LocalCache(tmp_path / "cache", retention=None, fsync=False)
    cache.define_dataset(INFO)
    clock = ManualClock(T0)
    observer = CountingObserver()
    driver = ExportDriver.from_config(
        load_config(document), cache=cache, clock=clock, observer=observer
    )
    maintained: list[dict[str, Any] | None] = []
    try:
        # A pass every 30 minutes from 20:00 to 02:30: day one closes at midnight.
        for i in range(14):
            cache.append("events", _rows(clock.t - timedelta(minutes=20), 10 * i))
            cache.seal()
            report = await driver.run_once(backfill=i == 0)
            assert report.ok, report.errors
            maintained.append(report.sinks["lake"].maintenance)
            clock.t += timedelta(minutes=30)
        table = driver.sink("lake").table.load_table(INFO)  # type: ignore[attr-defined]
    finally:
        await driver.close()
    # Due at once (never run), then when the two-hourly schedule fires:
    # 22:00, 00:00 and 02:00.
    ran = [i for i, m in enumerate(maintained) if m is not None]
    assert ran == [0, 4, 8, 12]
    # The 02:00 run compacted the first day (closed an hour after midnight).
    last = maintained[12]
    assert last is not None and last["ok"]
    assert last["datasets"]["events"]["files_replaced"] == 9
    assert "9 files compacted" in last["summary"]
    assert observer.counters["lake"].maintenance_runs == 4
    days: dict[int, int] = {}
    for f in live_files(table):
        days[f.partition[0]] = days.get(f.partition[0], 0) + 1
    assert sorted(days.values()) == [1, 5]
    assert table.scan().to_arrow().num_rows == 14 * 5
    assert len(table.metadata.snapshots) <= 2 + 2  # kept, plus the passes since

    status = collect_status(load_config(document))
    kept = status["sinks"]["lake"]["maintenance"]
    assert kept["ok"] and kept["at"].startswith("2026-05-02T02:")
    assert "files compacted" in kept["summary"]


def test_maintain_command_runs_now_and_reports_json(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    document = _document(tmp_path, enabled=False)
    (tmp_path / "hypaware.json").write_text(json.dumps(document))
    cache = LocalCache(tmp_path / "cache", retention=None, fsync=False)
    cache.define_dataset(INFO)
    for i in range(3):
        cache.append("events", _rows(T0 - timedelta(days=2, minutes=-i), 10 * i))
        cache.seal()
    monkeypatch.chdir(tmp_path)
    # Maintenance off: export leaves the table alone...
    assert main(["export", "--config", "hypaware.json", "--once", "--backfill"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["sinks"]["lake"]["maintenance"] is None
    # ...and `maintain` runs it when asked.
    assert main(["maintain", "--config", "hypaware.json", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["ok"] is True
    assert out["sinks"]["lake"]["datasets"]["events"]["properties_set"] == []
    assert out["skipped"] == []
    assert main(["maintain", "--config", "hypaware.json", "--sink", "nope"]) == 2
    assert "no such sink 'nope'" in capsys.readouterr().err
