"""The Iceberg benchmark at a tiny size, so it keeps working (its timings are not checked)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.iceberg, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("partitions", ["conversation", "day"])
def test_benchmark_runs_at_a_tiny_size(partitions: str) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.iceberg_export",
            "--rows",
            "3000",
            "--conversations",
            "40",
            "--partitions",
            partitions,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    # Exit 1 means a target was missed, which a tiny size says nothing about.
    assert proc.returncode in (0, 1), proc.stderr
    out = proc.stdout
    assert "Iceberg export: 3,000 rows" in out
    for name in ("hypaware", "pyiceberg append", "pyarrow"):
        assert f"  {name} " in out
    assert "7 files" in out


def test_the_pass_benchmark_runs_cold_and_warm_at_a_tiny_size() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.iceberg_pass", "--rows", "2000", "--repeat", "1"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    # A tiny run may miss a ratio target (exit 1) but must not crash (exit 2+).
    assert proc.returncode in (0, 1), proc.stderr
    for line in ("cold (new process)", "warm (driver used once)", "warm vs sort+append"):
        assert line in proc.stdout


def test_record_benchmark_runs_at_a_tiny_size() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.iceberg_record", "--snapshots", "120", "--repeat", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode in (0, 1), proc.stderr
    assert "read_record (20 foreign on top)" in proc.stdout
    assert " 120 " in proc.stdout


def growth(passes: int) -> tuple[int, str, dict[str, Any]]:
    """The growth benchmark's exit status, output and last checkpoint after `passes`."""
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.iceberg_growth", "--passes", str(passes), "--json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode in (0, 1), proc.stderr
    *_, last = json.loads(next(x for x in proc.stdout.splitlines() if x.startswith("[")))
    assert last["passes"] == passes
    return proc.returncode, proc.stdout, last


def test_growth_benchmark_runs_at_a_tiny_size() -> None:
    code, out, last = growth(12)
    assert code == 0
    assert "Iceberg growth: 200 rows a pass" in out
    # One live data file per pass: the footprint it measures is real.
    assert sum(last["table"]["data_files_per_day"].values()) == 12
    assert last["table"]["snapshots"] <= 12
    assert last["blob_root"]["files"] >= 12


def test_old_metadata_files_are_removed_after_100_versions() -> None:
    *_, last = growth(110)
    # 111 versions written (the create and 110 commits); the newest 100 and the current stay.
    assert last["table"]["metadata_json"] == 101
    # Hourly maintenance (every 12 passes of data) keeps the newest 10 snapshots.
    assert last["table"]["snapshots"] <= 10 + 12
