"""Pruning: one conversation on one day of a 7-day archive opens only that day's files."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

import hypaware
import hypaware.blob.query_source as parquet_source
from hypaware.iceberg.fileio import ObstoreFileIO

from .helpers import DAY0, cache_for, config, export, iceberg_sink, make_rows, parquet_sink

DAYS = 7
DAY = "2026-03-04"


def _archive(tmp_path: Path, sink: dict[str, Any]) -> hypaware.HypawareConfig:
    cfg = config(tmp_path, {"arch": sink})
    cache = cache_for(cfg)
    for day in range(DAYS):
        cache.append("events", make_rows(day * 1000, 90, day=day, convs=3))
    cache.seal("events")
    report = export(cfg, cache)
    assert report.ok
    # The cache keeps nothing: every row must come from the archive.
    for part in cache.ready_partitions("events"):
        (cache.path / "events" / "sealed" / f"{part.id}.arrow").unlink()
    return cfg


def _expected() -> list[int]:
    rows = make_rows(3000, 90, day=3, convs=3)
    return sorted(r["row_id"] for r in rows if r["conv"] == "c1")


def _one_key_one_day(cfg: hypaware.HypawareConfig) -> list[int]:
    reader = hypaware.query(
        cfg, "events", since=DAY, until="2026-03-05", keys=["c1"], columns=["row_id"]
    )
    return sorted(reader.read_all().column("row_id").to_pylist())


def test_parquet_on_local_fs_opens_only_that_days_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _archive(tmp_path, parquet_sink(tmp_path / "out"))
    opened: list[str] = []
    real = parquet_source._filesystem

    def counting(store: Any) -> tuple[Any, str]:
        fs, root = real(store)
        inner = fs._open

        def _open(path: str, *args: Any, **kwargs: Any) -> Any:
            opened.append(path)
            return inner(path, *args, **kwargs)

        fs._open = _open
        return fs, root

    monkeypatch.setattr(parquet_source, "_filesystem", counting)
    assert _one_key_one_day(cfg) == _expected()
    assert opened, "the archive was not read"
    assert all(f"/date={DAY}/" in p for p in opened), opened
    archive = sorted(str(p) for p in (tmp_path / "out").rglob("*.parquet"))
    that_day = [p for p in archive if f"/date={DAY}/" in p]
    assert len(that_day) < len(archive)
    assert len(set(opened)) <= len(that_day)

    # Open-ended: from that day on, earlier days' files stay closed.
    opened.clear()
    later = hypaware.query(cfg, "events", since=DAY, columns=["row_id"]).read_all()
    assert later.num_rows == (DAYS - 3) * 90
    assert {p.split("/date=")[1][:10] for p in opened} == {
        f"2026-03-{day:02d}" for day in range(4, DAYS + 1)
    }

    opened.clear()
    everything = hypaware.query(cfg, "events", columns=["row_id"]).read_all()
    assert everything.num_rows == DAYS * 90
    assert len(set(opened)) == len(archive)


@pytest.mark.iceberg
def test_iceberg_opens_only_that_days_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _archive(tmp_path, iceberg_sink(tmp_path / "wh"))
    opened: list[str] = []
    real = ObstoreFileIO.new_input

    def new_input(self: ObstoreFileIO, location: str) -> Any:
        if location.endswith(".parquet"):
            opened.append(location)
        return real(self, location)

    monkeypatch.setattr(ObstoreFileIO, "new_input", new_input)
    assert _one_key_one_day(cfg) == _expected()
    assert opened, "the table was not read"
    day = DAY0.replace(day=4).date().isoformat()
    assert all(f"ts_day={day}" in p for p in opened), opened

    opened.clear()
    assert hypaware.query(cfg, "events", columns=["row_id"]).read_all().num_rows == DAYS * 90
    assert len({p.split("ts_day=")[1][:10] for p in opened}) == DAYS
