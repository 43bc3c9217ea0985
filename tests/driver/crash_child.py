"""Runs the export driver until the cache is fully exported; the crash test kills it.

Usage: python -m tests.driver.crash_child CONFIG [PAUSE]
Prints RUNNING once the driver is built, DONE when nothing is left to export.

PAUSE (``begin:N`` or ``settle:N``) makes the kill land mid-batch on purpose:
right after the N-th batch of this run is recorded as in flight (``begin``),
or right before the N-th batch's progress is settled, its files already
written (``settle``), the child prints PAUSED and stops there until killed.
"""

from __future__ import annotations

import asyncio
import sys
import time
from typing import Any

from hypaware.core.config_loader import load_config
from hypaware.export.driver import ExportDriver
from hypaware.export.state import ProgressStore


def _pause_at(where: str, nth: int) -> None:
    """Patch ProgressStore so the `nth` call of `where` stops the whole process."""
    calls = 0

    def pause() -> None:
        nonlocal calls
        calls += 1
        if calls == nth:
            print("PAUSED", flush=True)
            # Blocks the event loop on purpose: nothing moves until SIGKILL.
            time.sleep(3600)

    if where == "begin":
        original_begin = ProgressStore.begin_batch

        def begin_batch(self: ProgressStore, *args: Any, **kwargs: Any) -> Any:
            result = original_begin(self, *args, **kwargs)
            pause()
            return result

        ProgressStore.begin_batch = begin_batch  # type: ignore[method-assign]
    elif where == "settle":
        original_settle = ProgressStore.settle_batch

        def settle_batch(self: ProgressStore, *args: Any, **kwargs: Any) -> Any:
            pause()
            return original_settle(self, *args, **kwargs)

        ProgressStore.settle_batch = settle_batch  # type: ignore[method-assign]
    else:
        raise SystemExit(f"unknown pause point {where!r}")


async def main(path: str) -> int:
    driver = ExportDriver.from_config(load_config(path))
    print("RUNNING", flush=True)
    try:
        for _ in range(1000):
            report = await driver.run_once(backfill=True)
            sink = report.sinks["local"]
            if sink.errors:
                print("ERROR", sink.errors, flush=True)
            if sink.partitions == 0 and sink.lag_partitions == 0 and not sink.errors:
                print("DONE", flush=True)
                return 0
    finally:
        await driver.close()
    return 1


if __name__ == "__main__":
    if len(sys.argv) > 2:
        where, _, nth = sys.argv[2].partition(":")
        _pause_at(where, int(nth))
    sys.exit(asyncio.run(main(sys.argv[1])))
