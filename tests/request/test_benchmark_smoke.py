"""The throughput benchmark still runs (at a tiny size)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def test_central_throughput_runs() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.central_throughput", "--rows", "300",
         "--partitions", "3", "--chunk-rows", "50", "--repeat", "1"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert "ratio sink / plain loop" in out.stdout
    assert "rows 300 in 3 partitions, 6 chunks" in out.stdout, out.stdout
