"""Run in child processes by the many-writers test (spawned, so importable by module path)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from hypaware.core.types import ExportOptions

from .helpers import batch, build_sink, partition, rows_for, sink_config


def export_share(root: str, writer: int, batches: int, start: Any) -> list[int]:
    """Export this writer's own partitions in `batches` batches; returns the rows each wrote."""
    base = Path(root)
    cfg = sink_config(
        base,
        state=base / f"state-{writer}",
        catalog={"type": "sqlite", "path": str(base / "shared-catalog.db")},
        commit_backoff=0.02,
        commit_retries=30,
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
            result = await sink.export_batch(
                batch(f"w{writer}-b{b}", parts, cache=cache), ExportOptions()
            )
            if result.retry_partitions:
                raise AssertionError(result.retry_partitions[0].reason)
            written.append(result.rows_written)
        await sink.close()
        return written

    return asyncio.run(run())
