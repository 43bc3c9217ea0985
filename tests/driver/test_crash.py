"""Crash safety: SIGKILL the driver at random moments; every row lands exactly once.

A child process exports a LocalCache to local-fs + Parquet in many small batches
(encode, write, settle progress). It is killed with SIGKILL, while this process
keeps appending and sealing rows, and restarted each time. A third of the kills
land after a random delay; the others land mid-batch on purpose, not by timing:
the child stops right after a batch is recorded as in flight, or right before
a written batch is settled, says so, and is killed there. So the test does not
depend on the machine's speed. At the end the archive holds every cache row
exactly once and the progress says everything was exported.
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


# Generous: the child imports pyarrow and opens sqlite, on a machine that may be
# busy with other work; the limits only stop a hung child.
START_TIMEOUT = 120.0
FINISH_TIMEOUT = 300.0


def _start(config: Path, pause: str | None = None) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.driver.crash_child",
            str(config),
            *([pause] if pause else []),
        ],
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


def _wait_line(proc: subprocess.Popen[str], *want: str, timeout: float) -> str | None:
    """The first of `want` the child prints, or None (it exited or `timeout` passed)."""
    assert proc.stdout is not None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], max(0.0, deadline - time.monotonic()))
        if not ready:
            break
        line = proc.stdout.readline()
        if not line:
            return None
        if line.strip() in want:
            return line.strip()
    return None


@pytest.mark.slow
@pytest.mark.timeout(900)
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
    kills = mid_batch = paused = 0
    for _ in range(200):
        if kills >= KILLS:
            break
        mode = rng.choice(["random", "begin", "settle"])
        pause = None if mode == "random" else f"{mode}:{rng.randint(1, 2)}"
        proc = _start(config, pause)
        try:
            assert _wait_line(proc, "RUNNING", timeout=START_TIMEOUT), "the child did not start"
            if pause is None:
                time.sleep(rng.uniform(0.0, 1.2))
                stopped = proc.poll() is None
            else:
                seen_line = _wait_line(proc, "PAUSED", "DONE", timeout=FINISH_TIMEOUT)
                assert seen_line is not None, "the child neither paused nor finished"
                stopped = seen_line == "PAUSED"
            if stopped:
                proc.send_signal(signal.SIGKILL)
                kills += 1
        finally:
            _stop(proc)
        store = ProgressStore(tmp_path / "state")
        in_flight = bool(store.in_flight("local"))
        store.close()
        mid_batch += in_flight
        if pause is not None and stopped:
            paused += 1
            # Stopped between recording a batch and settling it, so it must still be in flight.
            assert in_flight, f"killed at {pause} but no batch is in flight"
        add(rng.randint(300, 1500))

    print(f"{kills} kills, {paused} paused mid-batch, {mid_batch} with a batch in flight")
    assert kills >= KILLS
    assert paused >= KILLS // 3

    proc = _start(config)
    try:
        assert _wait_line(proc, "DONE", timeout=FINISH_TIMEOUT), "the final run did not finish"
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
