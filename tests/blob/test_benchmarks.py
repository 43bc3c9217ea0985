"""The benchmark scripts at a tiny size, so they keep working (their timings are not checked here)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

from benchmarks import datagen

ROOT = Path(__file__).resolve().parents[2]


def test_datagen_is_reproducible_and_shaped_like_conversations() -> None:
    a = datagen.table(3_000, seed=7, batch_rows=1_000)
    b = datagen.table(3_000, seed=7, batch_rows=1_000)
    c = datagen.table(3_000, seed=8, batch_rows=1_000)
    assert a.equals(b) and not a.equals(c)
    assert a.schema == datagen.SCHEMA
    assert a.column("row_id").to_pylist() == list(range(3_000))
    ts = a.column("ts").cast(pa.int64()).to_pylist()
    assert ts == sorted(ts)
    assert (ts[-1] - ts[0]) / 86_400e6 > 6.9
    lengths = [len(t) for t in a.column("text").to_pylist()]
    assert min(lengths) >= 100 and max(lengths) <= 600
    assert len(a.column("conversation_id").unique()) > 2_500
    assert set(a.column("role").to_pylist()) == set(datagen.ROLES)
    assert len(datagen.day_slices(a)) == 7


def test_datagen_streams_in_bounded_batches() -> None:
    sizes = [b.num_rows for b in datagen.batches(2_500, batch_rows=1_000)]
    assert sizes == [1_000, 1_000, 500]


def run(module: str, *args: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", f"benchmarks.{module}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    # A tiny run may miss a ratio target (exit 1) but must not crash (exit 2+).
    assert proc.returncode in (0, 1), proc.stderr
    return proc.stdout


@pytest.mark.slow
def test_export_local_runs() -> None:
    out = run("export_local", "--rows", "3000", "--repeat", "1")
    assert "ratio" in out and "pq.write_table" in out and "7 files" in out


@pytest.mark.slow
@pytest.mark.s3
def test_export_s3_runs() -> None:
    out = run("export_s3", "--rows", "3000", "--repeat", "1")
    assert "ratio" in out and "write_table+put" in out


@pytest.mark.slow
def test_export_memory_runs() -> None:
    out = run("export_memory", "--rows", "20000", "--row-group-size", "4096")
    assert "one row group" in out and "20,000 rows" in out
    assert "from a LocalCache" in out


@pytest.mark.slow
def test_export_memory_runs_from_a_generated_stream() -> None:
    out = run("export_memory", "--rows", "20000", "--row-group-size", "4096", "--source", "stream")
    assert "one row group" in out and "20,000 rows" in out
    assert "generated as a stream" in out and "LocalCache" not in out


@pytest.mark.slow
def test_jsonl_export_runs() -> None:
    out = run("jsonl_export", "--rows", "3000", "--repeat", "1")
    assert "ratio to DuckDB" in out and "3,000 rows" in out


@pytest.mark.slow
def test_export_memory_runs_with_one_encoder_per_day() -> None:
    out = run("export_memory", "--rows", "20000", "--row-group-size", "2048", "--days", "4")
    assert "4 one-day partitions" in out and "encoder(s), 4 file(s)" in out


@pytest.mark.slow
def test_cache_driver_runs() -> None:
    out = run("cache_driver", "--rows", "3000", "--repeat", "1")
    assert "append+seal" in out and "export" in out


def test_the_runner_finds_every_benchmark() -> None:
    from benchmarks.__main__ import discover

    names = discover()
    assert {"export_local", "export_s3", "export_memory", "import_time"} <= set(names)
    assert {"iceberg_pass", "jsonl_export", "cache_driver"} <= set(names)
    assert "datagen" not in names and not any(n.startswith("_") for n in names)


@pytest.mark.slow
def test_the_runner_runs_the_export_benchmarks_at_one_size() -> None:
    mine = ("export_local", "export_s3", "export_memory")
    out = run("__main__", "--rows", "2000", "--repeat", "1", *(f"--only={n}" for n in mine))
    for name in mine:
        assert f"== {name}" in out
    assert "== export_memory --rows 10000" in out
