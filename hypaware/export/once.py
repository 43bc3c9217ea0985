"""`export_once`: one export pass from synchronous code (scripts, notebooks, cron jobs)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from hypaware.cache.protocol import Cache
from hypaware.core.config import HypawareConfig
from hypaware.core.errors import HypawareError
from hypaware.core.loops import refuse_running_loop
from hypaware.export.reports import RunReport

if TYPE_CHECKING:
    from hypaware.core.registry import Registry

__all__ = ["export_once"]


def export_once(
    config: HypawareConfig | Mapping[str, Any] | str | os.PathLike[str],
    *,
    cache: Cache | None = None,
    backfill: bool = False,
    sinks: Iterable[str] | None = None,
    env: Mapping[str, str] | None = None,
    registry: Registry | None = None,
) -> RunReport:
    """Run one export pass over every sink of `config` (or those in `sinks`) and close.

    The synchronous face of ``ExportDriver.from_config(...).run_once(...)``:
    builds the driver, runs one pass now, closes it (sinks flushed and
    closed, no task left behind) and returns the `RunReport`; errors are in
    the report, as with `run_once`. `config` is a `HypawareConfig`, a config
    mapping or a JSON file path; `cache` defaults to the config's
    `LocalCache`; `backfill` as in `ExportDriver.run_once`.

    Raises `ConfigError` for a config that does not resolve, and
    `HypawareError` when called inside a running event loop (await
    ``ExportDriver.run_once()`` there instead).
    """
    refuse_running_loop("export_once()", "ExportDriver.run_once()", HypawareError)
    if not isinstance(config, HypawareConfig):
        from hypaware.core.config_loader import load_config

        config = load_config(config)
    resolved = config
    selected = list(sinks) if sinks is not None else None

    async def run() -> RunReport:
        from hypaware.export.driver import ExportDriver

        driver = ExportDriver.from_config(resolved, cache=cache, registry=registry, env=env)
        async with driver:
            return await driver.run_once(sinks=selected, backfill=backfill)

    return asyncio.run(run())
