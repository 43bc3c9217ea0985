"""``hypaware demo [--dir DIR]``: a cache of synthetic conversation events, exported.

Creates ``DIR/cache`` (a `LocalCache` holding a few days of events),
``DIR/hypaware.json`` (the embedded defaults: one local Parquet sink under
``DIR/export``), runs one export with backfill, and says where everything is
and how to query it. Running it again reuses what is there: the second
export finds nothing new.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path
from typing import Any, TextIO

from hypaware.cache.local import LocalCache
from hypaware.cli.common import error, errors
from hypaware.cli.demo_cache import DEMO_DATASET, DemoSeed, demo_config, seed_demo_cache
from hypaware.cli.export import format_bytes
from hypaware.core.config_loader import load_config
from hypaware.core.errors import ConfigError, HypawareError
from hypaware.export.driver import ExportDriver
from hypaware.export.reports import RunReport

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "demo",
        help="seed a demo cache, export it to local Parquet, show how to query it",
        description="Create a local cache with a few days of synthetic conversation events "
        "under DIR/cache, write DIR/hypaware.json (a local Parquet sink under DIR/export), "
        "run one export and print where the files are and how to query them.",
    )
    parser.add_argument(
        "--dir", default="hypaware-demo", help="where to put it (default ./hypaware-demo)"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    root = Path(args.dir).expanduser().resolve()
    config_path = root / "hypaware.json"
    try:
        cache, seeded = _set_up(root, config_path)
        config = load_config(config_path)
        report = asyncio.run(_export(config))
    except ConfigError as exc:
        return errors("demo", exc, str(config_path))
    except (HypawareError, OSError) as exc:
        error("demo", exc)
        return 2

    parts = list(cache.ready_partitions(DEMO_DATASET))
    export_dir = root / "export"
    files = sorted(export_dir.rglob("*.parquet")) if export_dir.is_dir() else []
    size = sum(f.stat().st_size for f in files)
    out = sys.stdout
    print("hypaware demo", file=out)
    _print_seeded(seeded, out)
    print(
        f"  cache     {root / 'cache'}  ({len(parts)} sealed partitions of "
        f"{DEMO_DATASET!r}, by conversation and hour)",
        file=out,
    )
    print(f"  config    {config_path}", file=out)
    _print_exported(report, out)
    print(
        f"  archive   {export_dir}  ({len(files)} Parquet files, {format_bytes(size)} in all)",
        file=out,
    )
    _print_next_steps(config_path, export_dir, out)
    return 0 if report.ok else 1


def _set_up(root: Path, config_path: Path) -> tuple[LocalCache, DemoSeed | None]:
    """The demo cache, seeded if it has no events yet, and the config, written if missing."""
    root.mkdir(parents=True, exist_ok=True)
    cache = LocalCache(root / "cache")
    seeded = None
    if not cache.has_dataset(DEMO_DATASET):
        seeded = seed_demo_cache(cache)
    if not config_path.exists():
        config_path.write_text(json.dumps(demo_config(), indent=2) + "\n", encoding="utf-8")
    return cache, seeded


def _print_seeded(seeded: DemoSeed | None, out: TextIO) -> None:
    if seeded is not None:
        print(
            f"  seeded    {seeded.rows:,} events in {seeded.conversations} conversations, "
            f"{seeded.start:%Y-%m-%d %H:%M} to {seeded.end:%Y-%m-%d %H:%M} UTC",
            file=out,
        )
    else:
        print("  seeded    nothing new (the demo cache was already there)", file=out)


def _print_exported(report: RunReport, out: TextIO) -> None:
    for name, r in report.sinks.items():
        print(
            f"  exported  sink {name!r}: {r.partitions} partitions, {r.rows:,} rows, "
            f"{r.files} files this run",
            file=out,
        )
        for message in r.errors:
            print(f"  error     sink {name!r}: {message}", file=out)


def _print_next_steps(config_path: Path, export_dir: Path, out: TextIO) -> None:
    """How to query what was exported, and how to export again."""
    glob = f"{export_dir}/{DEMO_DATASET}/**/*.parquet"
    print("\nQuery it (cache and archive together, every row once):", file=out)
    print(f"  hypaware query --config {config_path} {DEMO_DATASET} --limit 10", file=out)
    print(
        f"  hypaware query --config {config_path} {DEMO_DATASET} "
        "--where \"role == 'assistant'\" --columns ts,conversation_id,tokens_out --limit 5",
        file=out,
    )
    sql = (
        "SELECT role, count(*) AS events, sum(tokens_out) AS tokens "
        f"FROM {DEMO_DATASET} GROUP BY role"
    )
    print("  (SQL needs DuckDB: pip install 'hypaware[query]')", file=out)
    print(f'  hypaware query --config {config_path} {DEMO_DATASET} --sql "{sql}"', file=out)
    print("The archive is plain hive-partitioned Parquet, for any reader:", file=out)
    print(f"  {glob}", file=out)
    print("\nExport again (finds nothing new) and look at progress:", file=out)
    print(f"  hypaware export --config {config_path} --once", file=out)
    print(f"  hypaware status --config {config_path}", file=out)


async def _export(config: Any) -> RunReport:
    driver = ExportDriver.from_config(config)
    try:
        return await driver.run_once(backfill=True)
    finally:
        await driver.close()
