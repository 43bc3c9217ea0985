"""``hypaware maintain [--config FILE] [--sink NAME ...] [--json]``: keep sink destinations healthy.

Runs, now, the maintenance the driver otherwise runs on each sink's
``maintenance.schedule``: for an Iceberg sink, snapshot expiry, manifest
merging, compaction of closed days and the removal of files nothing reads
(see docs/iceberg.md). Sinks without maintenance are left out. Safe while
``hypaware export`` runs: both wait for the other's work on a sink.

Exit status: 0 when every step of every sink succeeded, 1 when one failed
(each failure printed, and recorded for ``status``), 2 for an unusable
config or an unknown sink.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from hypaware.cli.common import add_config_argument, checked_config, error, errors, print_table
from hypaware.core.errors import ConfigError, PluginError, StateError

__all__ = ["register", "run"]

COMMAND = "maintain"


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        COMMAND,
        help="maintain the sinks' tables now (expire, merge, compact)",
        description="Run each sink's maintenance now, whatever its schedule: for Iceberg "
        "sinks, snapshot expiry, manifest merging, compaction of closed days and removal "
        "of files no snapshot reads. No row is lost or written twice.",
    )
    add_config_argument(parser)
    parser.add_argument(
        "--sink", action="append", metavar="NAME", help="only this sink (repeat for several)"
    )
    parser.add_argument(
        "--json", action="store_true", help="print the reports as JSON even on a terminal"
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    checked = checked_config(COMMAND, args)
    if isinstance(checked, int):
        return checked
    config, plans = checked
    known = [s.name for s in config.sinks]
    for name in args.sink or []:
        if name not in known:
            from hypaware.core.registry import did_you_mean

            error(COMMAND, f"no such sink {name!r}{did_you_mean(name, known)}")
            return 2
    try:
        reports = asyncio.run(_main(config, plans, args.sink))
    except StateError as exc:
        error(COMMAND, exc)
        return 2
    except (ConfigError, PluginError) as exc:
        return errors(COMMAND, exc)
    ok = all(r["ok"] for r in reports.values())
    # Named, not dropped: a sink whose writer keeps nothing to maintain.
    skipped = [n for n in (args.sink or known) if n not in reports]
    if args.json or not sys.stdout.isatty():
        print(json.dumps({"ok": ok, "sinks": reports, "skipped": skipped}, sort_keys=True))
    else:
        rows: list[tuple[str, ...]] = [("SINK", "RESULT", "SECONDS")]
        rows += [(name, r["summary"], f"{r['seconds']:.2f}") for name, r in reports.items()]
        rows += [(name, "no maintenance (its writer has none)", "-") for name in skipped]
        print_table(rows, sys.stdout)
    for name, r in reports.items():
        for line in r["errors"]:
            error(COMMAND, f"sink {name!r}: {line}")
    return 0 if ok else 1


async def _main(config: Any, plans: Any, sinks: list[str] | None) -> dict[str, dict[str, Any]]:
    from hypaware.export.driver import ExportDriver

    driver = ExportDriver.from_config(config, plans=plans)
    try:
        done = await driver.maintain(sinks=sinks)
    finally:
        await driver.close()
    return {name: report.as_dict() for name, report in done.items()}
