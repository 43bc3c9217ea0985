"""One filter for every reader: ``--where`` pushed into Iceberg scan planning, checked alike everywhere."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

import hypaware
from hypaware.cli import main

from .helpers import cache_for, config, export, iceberg_sink, jsonl_sink, make_rows, parquet_sink

DAYS = 6
WHERE = "ts >= '2026-03-05T00:00:00Z' and role = 'user'"


def _archive(tmp_path: Path, sinks: dict[str, Any]) -> tuple[hypaware.HypawareConfig, Path]:
    doc = {
        "state_dir": str(tmp_path / "state"),
        "cache": {"path": str(tmp_path / "cache")},
        "sinks": sinks,
    }
    path = tmp_path / "hypaware.json"
    path.write_text(json.dumps(doc))
    cfg = config(tmp_path, sinks)
    cache = cache_for(cfg)
    for day in range(DAYS):
        cache.append("events", make_rows(day * 1000, 80, day=day))
    cache.seal("events")
    assert export(cfg, cache).ok
    # Every row must come from the sink, not the cache.
    for part in cache.ready_partitions("events"):
        (cache.path / "events" / "sealed" / f"{part.id}.arrow").unlink()
    return cfg, path


class _Planned:
    """Data files pyiceberg's scan planning hands to the reader, with their sizes."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        from pyiceberg.table import DataScan

        self.files: list[tuple[str, int]] = []
        self.selected: list[tuple[str, ...]] = []
        real = DataScan.plan_files

        def plan_files(scan: Any) -> Any:
            tasks = list(real(scan))
            self.selected.append(tuple(scan.selected_fields))
            self.files.extend((t.file.file_path, t.file.file_size_in_bytes) for t in tasks)
            return tasks

        monkeypatch.setattr(DataScan, "plan_files", plan_files)

    def take(self) -> tuple[int, int, tuple[str, ...]]:
        files, self.files = self.files, []
        selected = self.selected[-1] if self.selected else ()
        self.selected = []
        return len(files), sum(size for _, size in files), selected


def _rows(out: str) -> list[int]:
    return sorted(json.loads(line)["row_id"] for line in out.splitlines() if line)


@pytest.mark.iceberg
def test_where_on_iceberg_plans_fewer_files_and_bytes_same_rows_as_parquet(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg, path = _archive(
        tmp_path, {"ice": iceberg_sink(tmp_path / "wh"), "pq": parquet_sink(tmp_path / "out")}
    )
    planned = _Planned(monkeypatch)

    def cli(sink: str, *extra: str) -> list[int]:
        argv = ["query", "--config", str(path), "events", "--sink", sink, "--format", "jsonl"]
        code = main([*argv, "--columns", "row_id", *extra])
        out, err = capsys.readouterr()
        assert code == 0, err
        return _rows(out)

    everything = cli("ice")
    full_files, full_bytes, _ = planned.take()
    filtered = cli("ice", "--where", WHERE)
    files, size, selected = planned.take()

    expected = sorted(
        r["row_id"]
        for day in range(4, DAYS)
        for r in make_rows(day * 1000, 80, day=day)
        if r["role"] == "user"
    )
    assert len(everything) == DAYS * 80
    assert filtered == expected
    assert filtered == cli("pq", "--where", WHERE)
    assert full_files >= DAYS
    assert 0 < files < full_files
    assert 0 < size < full_bytes
    # Only the column asked for is read; pyiceberg evaluates the filter itself.
    assert selected == ("row_id",)

    # The library call compiles the same tree.
    tree = (hypaware.col("ts") >= "2026-03-05") & (hypaware.col("role") == "user")
    reader = hypaware.query(cfg, "events", sink="ice", where=tree, columns=["row_id"])
    assert sorted(reader.read_all().column("row_id").to_pylist()) == expected
    assert planned.take()[:2] == (files, size)


@pytest.mark.parametrize("kind", ["parquet", "iceberg", "jsonl"])
@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("tokns > 1", "no column 'tokns' (did you mean 'tokens'?)"),
        ("tokens > 'many'", "'many' is not a value of column 'tokens'"),
        ("ts < 3", "ISO date or time"),
        ("role = 1", "expected text in quotes"),
    ],
)
def test_bad_filters_are_refused_alike_for_every_sink_kind(
    tmp_path: Path, kind: str, where: str, message: str
) -> None:
    if kind == "iceberg":
        pytest.importorskip("pyiceberg")
    sink = {
        "parquet": parquet_sink(tmp_path / "out"),
        "iceberg": iceberg_sink(tmp_path / "wh"),
        "jsonl": jsonl_sink(tmp_path / "log"),
    }[kind]
    cfg = config(tmp_path, {"s": sink})
    cache = cache_for(cfg)
    cache.append("events", make_rows(0, 10))
    cache.seal("events")
    assert export(cfg, cache).ok
    with pytest.raises(hypaware.QueryInputError, match=_escaped(message)):
        hypaware.query(cfg, "events", where=where).read_all()
    if kind != "jsonl":
        with pytest.raises(hypaware.QueryInputError, match=_escaped(message)):
            hypaware.query(cfg, "events", sink="s", where=where).read_all()


def _escaped(text: str) -> str:
    import re

    return re.escape(text)
