"""Crash safety: SIGKILL the driver at random moments; every row lands exactly once.

A child process exports a LocalCache to local-fs + Parquet in many small batches
(encode, write, settle progress). It is killed with SIGKILL at random moments,
while this process keeps appending and sealing rows, and restarted each time.
At the end the archive holds every cache row exactly once and the progress says
everything was exported.
"""

from __future__ import annotations

import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from hypaware.export.state import ProgressStore
from tests.driver.helpers import all_row_ids, make_cache, rows

ROOT = Path(__file__).resolve().parents[2]
KILLS = 22


def _start(config: Path) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.driver.crash_child", str(config)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _stop(proc: subprocess.Popen[str]) -> None:
    proc.kill()
    proc.wait()
    assert proc.stdout is not None
    proc.stdout.close()


def _wait_line(proc: subprocess.Popen[str], want: str, timeout: float) -> bool:
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:
            return False
        if line.strip() == want:
            return True
    return False


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_sigkill_at_random_moments_loses_and_doubles_nothing(tmp_path: Path) -> None:
    rng = random.Random(20261202)
    cache = make_cache(tmp_path / "cache", count=0)
    next_row = 0

    def add(n: int) -> None:
        nonlocal next_row
        cache.append("events", rows(next_row, n, convs=20, step=2.0))
        cache.seal()
        next_row += n

    add(20_000)
    config = tmp_path / "hypaware.json"
    config.write_text(
        json.dumps(
            {
                "state_dir": "state",
                "cache": {"path": "cache"},
                "sinks": {
                    "local": {
                        "writer": "@hypaware/format-parquet",
                        "destination": "@hypaware/local-fs",
                        "config": {"root": "export", "max_batch_rows": 200},
                    }
                },
            }
        )
    )
    kills = mid_batch = 0
    for _ in range(200):
        if kills >= KILLS:
            break
        proc = _start(config)
        try:
            assert _wait_line(proc, "RUNNING", 30), "the child did not start"
            time.sleep(rng.uniform(0.0, 1.2))
            if proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                kills += 1
        finally:
            _stop(proc)
        store = ProgressStore(tmp_path / "state")
        mid_batch += bool(store.in_flight("local"))
        store.close()
        add(rng.randint(300, 1500))

    print(f"{kills} kills, {mid_batch} with a batch in flight")
    assert kills >= KILLS
    # Killed between recording a batch and settling it: during encode, write or the ack.
    assert mid_batch >= KILLS // 4

    proc = _start(config)
    try:
        assert _wait_line(proc, "DONE", 120), "the final run did not finish"
    finally:
        _stop(proc)

    leftovers = [
        p for p in (tmp_path / "export").rglob("*") if p.is_file() and p.suffix != ".parquet"
    ]
    print(f"{len(leftovers)} temporary files left by killed writes")
    seen: Counter[str] = Counter()
    for path in (tmp_path / "export").rglob("*.parquet"):
        seen.update(pq.read_table(path, columns=["row_id"]).column("row_id").to_pylist())
    expected = all_row_ids(cache)
    assert len(expected) == next_row
    assert set(seen) == expected, "rows lost or invented"
    assert max(seen.values()) == 1, "rows doubled"

    store = ProgressStore(tmp_path / "state")
    parts = cache.ready_partitions("events")
    assert store.high_water("local", "events") == max(p.seq for p in parts)
    assert store.respooled("local") == []
    assert store.in_flight("local") == []
    assert store.sink_state("local").rows_exported >= next_row
    store.close()
