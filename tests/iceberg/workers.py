"""Run in child processes by the many-writers test (spawned, so importable by module path)."""

from __future__ import annotations

import asyncio
import datetime as dt
from pathlib import Path
from typing import Any

from hypaware.core.types import ExportOptions

from .helpers import DATASET, DAY0, batch, build_sink, partition, rows_for, sink_config

# Every day the writers write is closed by then.
LATER = DAY0 + dt.timedelta(days=30)


def export_share(
    root: str, writer: int, batches: int, start: Any, maintain: bool = False
) -> list[int]:
    """Export this writer's own partitions in `batches` batches; returns the rows each wrote.

    With `maintain`, the writer also maintains the table after each batch
    (every day closed, nothing kept for age, two snapshots kept), so that
    compactions, expiries and appends of four processes race. A batch that
    fails then (its parent's manifests expired under it) is tried again, as
    the driver would at its next pass.
    """
    base = Path(root)
    extra: dict[str, Any] = {}
    if maintain:
        extra["maintenance"] = {"keep_for": 0, "keep_snapshots": 2, "compact_after": 0}
    cfg = sink_config(
        base,
        state=base / f"state-{writer}",
        catalog={"type": "sqlite", "path": str(base / "shared-catalog.db")},
        commit_backoff=0.02,
        commit_retries=30,
        **extra,
    )

    async def run() -> list[int]:
        sink = build_sink(cfg)
        written = []
        start.wait()
        for b in range(batches):
            parts = [
                partition(
                    f"w{writer}-b{b}-p{p}",
                    rows_for(f"w{writer}-c{p}", (b + p) % 3, 20, start=100 * b),
                    seq=10 * b + p + 1,
                )
                for p in range(10)
            ]
            cache = f"cache-of-writer-{writer}"
            rows = 0
            for _attempt in range(10 if maintain else 1):
                result = await sink.export_batch(
                    batch(f"w{writer}-b{b}", parts, cache=cache), ExportOptions()
                )
                rows += result.rows_written
                if not result.retry_partitions:
                    break
                failed = {r.partition_id for r in result.retry_partitions}
                parts = [p for p in parts if p.id in failed]
            if result.retry_partitions:
                raise AssertionError(result.retry_partitions[0].reason)
            written.append(rows)
            if maintain:
                # With nothing kept for age, a step may find files another process's
                # expiry just deleted: it reports that and changes nothing. The test
                # checks what matters, every row exactly once.
                await sink.table.maintain(DATASET, now=LATER)  # type: ignore[attr-defined]
        await sink.close()
        return written

    return asyncio.run(run())
