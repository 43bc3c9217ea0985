"""Runs the export driver until the cache is fully exported; the crash test kills it.

Usage: python -m tests.driver.crash_child CONFIG
Prints RUNNING once the driver is built, DONE when nothing is left to export.
"""

from __future__ import annotations

import asyncio
import sys

from hypaware.core.config_loader import load_config
from hypaware.export.driver import ExportDriver


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
    sys.exit(asyncio.run(main(sys.argv[1])))
