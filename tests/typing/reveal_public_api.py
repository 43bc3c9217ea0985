"""Type-checked, never run: what hypaware's public API gives a plugin author, for mypy --strict.

`test_public_types.py` runs mypy on this file and on the example package and
compares each `reveal_type` with the ``# reveals:`` comment above it (long
types go on in ``#   `` lines, joined with one space).
"""

from __future__ import annotations

from typing import reveal_type

from hypaware_example_sqlite.arrow_ipc import ArrowIpcEncoder
from hypaware_example_sqlite.manifests import SQLITE
from hypaware_example_sqlite.sqlite_sink import SqliteSink, make_sink

from hypaware import (
    BlobPlan,
    Encoder,
    ExportDriver,
    QueryableSink,
    Registry,
    build,
    export_once,
    load_config,
    resolve,
)


# The example's classes keep the contracts by shape: mypy checks these returns.
def sqlite_is_queryable(sink: SqliteSink) -> QueryableSink:
    return sink


def arrow_ipc_is_an_encoder(encoder: ArrowIpcEncoder) -> Encoder:
    return encoder


async def main() -> None:
    config = load_config({"sinks": {}})
    # reveals: hypaware.core.config.HypawareConfig
    reveal_type(config)
    plans = resolve(config, Registry.from_entry_points())
    # reveals: tuple[hypaware.core.resolver.BlobPlan
    #   | hypaware.core.resolver.RequestPlan, ...]
    reveal_type(plans)
    # Each shape's parts are there, not optional, once isinstance has told them apart.
    first = plans[0]
    if isinstance(first, BlobPlan):
        # reveals: hypaware.core.resolver.Component
        reveal_type(first.destination)
    else:
        # reveals: hypaware.core.resolver.Component
        reveal_type(first.plugin)
    sink = build(plans[0], config=config)
    # reveals: hypaware.core.contracts.ManagedSink
    reveal_type(sink)
    async with build(plans[0]) as managed:
        # reveals: hypaware.core.contracts.ManagedSink
        reveal_type(managed)
    # reveals: hypaware.export.reports.RunReport
    reveal_type(export_once(config, backfill=True))
    async with ExportDriver.from_config(config) as driver:
        # reveals: hypaware.export.driver.ExportDriver
        reveal_type(driver)
        # reveals: hypaware.core.contracts.Sink
        reveal_type(driver.sink("x"))
        # reveals: list[str]
        reveal_type(await driver.flush())
        # reveals: hypaware.export.reports.RunReport
        reveal_type(await driver.run_once())
    # reveals: Literal['destination'] | Literal['encoder'] | Literal['table-format']
    #    | Literal['sink']
    reveal_type(SQLITE.kind)
    # reveals: frozenset[Literal['hypaware.blob-store'] | Literal['hypaware.encoder']
    #    | Literal['hypaware.table-format'] | Literal['hypaware.http-endpoint']
    #    | Literal['hypaware.sink']]
    reveal_type(SQLITE.provides)
    # reveals: frozenset[Literal['queryable']]
    reveal_type(SQLITE.supports)
    # reveals: bool
    reveal_type(SQLITE.queryable)
    # reveals: def (config: hypaware_example_sqlite.manifests.SqliteConfig,
    #   ctx: hypaware.core.resolver.BuildContext)
    #    -> hypaware_example_sqlite.sqlite_sink.SqliteSink
    reveal_type(make_sink)
