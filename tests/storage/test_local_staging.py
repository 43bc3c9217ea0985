"""A write killed midway leaves ``<name>#<n>``; building local-fs tidies old ones."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq

from hypaware import Registry, build, load_config, resolve
from hypaware.destinations.local_fs import STAGING_MAX_AGE


def test_building_removes_old_staging_files_only(tmp_path: Path) -> None:
    root = tmp_path / "export"
    day = root / "events" / "date=2026-03-01"
    day.mkdir(parents=True)
    pq.write_table(pa.table({"v": [1, 2]}), day / "part-a-0000.parquet")
    old = day / "part-b-0000.parquet#3"
    old.write_bytes(b"PAR1 half a file")
    stale = time.time() - STAGING_MAX_AGE - 60
    os.utime(old, (stale, stale))
    fresh = day / "part-c-0000.parquet#1"
    fresh.write_bytes(b"PAR1 being written right now")

    with_staging = ds.dataset(root / "events", format="parquet", partitioning="hive")
    assert len(with_staging.files) == 3  # a raw reader sees the leftovers too

    config = load_config(
        {
            "sinks": {
                "s": {
                    "writer": "@hypaware/format-parquet",
                    "destination": "@hypaware/local-fs",
                    "config": {"root": "export"},
                }
            }
        },
        base_dir=str(tmp_path),
    )
    (plan,) = resolve(config, Registry.from_entry_points())
    sink = build(plan, config=config)
    asyncio.run(sink.close())

    assert not old.exists()
    assert fresh.exists()
    assert (day / "part-a-0000.parquet").exists()
