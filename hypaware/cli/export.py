"""``hypaware export --config FILE [--once] [--sink NAME] [--backfill]``.

On a terminal: a live line of per-sink totals while it runs and a table at
the end. Otherwise: quiet while running, and one JSON summary on stdout.
Exit status: 0 when every sink exported cleanly, 1 when some sink failed or
left partitions to retry, 2 for a configuration that cannot be used.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys
from collections.abc import Sequence
from typing import Any, TextIO

from hypaware.cli import redact
from hypaware.core.config_loader import load_config
from hypaware.core.errors import ConfigError, PluginError, StateError
from hypaware.export.driver import ExportDriver
from hypaware.export.observer import CountingObserver, SinkCounters
from hypaware.export.reports import RunReport, SinkReport

__all__ = ["ProgressDisplay", "format_bytes", "register", "run"]


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "export",
        help="export the cache to the configured sinks",
        description="Export sealed cache partitions to every configured sink, each on its "
        "own schedule, until interrupted; with --once, one pass over every sink now.",
    )
    parser.add_argument("--config", required=True, metavar="FILE", help="path to the JSON config")
    parser.add_argument("--once", action="store_true", help="one pass now, then exit")
    parser.add_argument(
        "--sink",
        action="append",
        metavar="NAME",
        help="only this sink (repeat for several)",
    )
    parser.add_argument(
        "--backfill",
        action="store_true",
        help="a sink new to a dataset starts from its first partition, not from now",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the summary as JSON even on a terminal"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="log each batch")
    parser.set_defaults(func=run)


def format_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


class ProgressDisplay(CountingObserver):
    """Counts like `CountingObserver` and redraws one status line on a terminal."""

    def __init__(self, stream: TextIO, sinks: Sequence[str], *, live: bool) -> None:
        super().__init__()
        self.stream = stream
        self.live = live
        for name in sinks:
            self.of(name)
        self._width = 0

    def _line(self) -> str:
        parts = []
        for name, c in self.counters.items():
            text = (
                f"{name}: {c.partitions} partitions, {c.rows:,} rows, "
                f"{format_bytes(c.bytes)}, {c.retries} retries"
            )
            if c.errors:
                text += f", {c.errors} errors"
            parts.append(text)
        return " | ".join(parts)

    def redraw(self) -> None:
        if not self.live:
            return
        line = self._line()
        pad = max(0, self._width - len(line))
        self.stream.write("\r" + line + " " * pad)
        self.stream.flush()
        self._width = len(line)

    def finish(self) -> None:
        if self.live and self._width:
            self.stream.write("\n")
            self.stream.flush()
            self._width = 0

    def batch_exported(self, sink: str, dataset: str, **kwargs: Any) -> None:
        super().batch_exported(sink, dataset, **kwargs)
        self.redraw()

    def partitions_retried(self, *args: Any, **kwargs: Any) -> None:
        super().partitions_retried(*args, **kwargs)
        self.redraw()

    def error(self, sink: str | None, message: str) -> None:
        super().error(sink, message)
        self.redraw()


def _summary_rows(counters: dict[str, SinkCounters]) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = [
        ("SINK", "PARTITIONS", "ROWS", "BYTES", "FILES", "RETRIES", "LAG", "ERROR")
    ]
    for name, c in counters.items():
        rows.append(
            (
                name,
                str(c.partitions),
                f"{c.rows:,}",
                format_bytes(c.bytes),
                str(c.files),
                str(c.retries),
                f"{c.lag_partitions} ({c.lag_rows:,} rows)",
                c.last_error or "-",
            )
        )
    return rows


def print_table(rows: list[tuple[str, ...]], stream: TextIO) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        cells = (cell.ljust(w) for cell, w in zip(row, widths, strict=True))
        print("  ".join(cells).rstrip(), file=stream)


def report_json(report: RunReport) -> dict[str, Any]:
    return {
        "ok": report.ok,
        "partitions": report.partitions,
        "rows": report.rows,
        "sinks": {name: r.as_dict() for name, r in report.sinks.items()},
    }


def run(args: argparse.Namespace) -> int:
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    redact.install(redact.configured_secrets(config))
    names = args.sink or [s.name for s in config.sinks]
    tty = sys.stdout.isatty() and not args.json
    display = ProgressDisplay(sys.stderr, names, live=tty and sys.stderr.isatty())
    try:
        return asyncio.run(_main(args, config, display, tty))
    except (ConfigError, PluginError, StateError) as exc:
        display.finish()
        lines = [str(p) for p in exc.problems] if isinstance(exc, ConfigError) else [str(exc)]
        for line in lines:
            print(f"error: {line}", file=sys.stderr)
        return 2


async def _main(args: argparse.Namespace, config: Any, display: ProgressDisplay, tty: bool) -> int:
    driver = ExportDriver.from_config(config, observer=display)
    try:
        if args.once:
            report = await driver.run_once(sinks=args.sink, backfill=args.backfill)
        else:
            report = await _forever(driver, args)
    finally:
        await driver.close()
    display.finish()
    if tty:
        print_table(_summary_rows(display.counters), sys.stdout)
    else:
        print(json.dumps(report_json(report), sort_keys=True))
    return 0 if report.ok else 1


async def _forever(driver: ExportDriver, args: argparse.Namespace) -> RunReport:
    """Run on the schedules until SIGINT/SIGTERM; the report adds up every pass."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)
    runner = asyncio.ensure_future(driver.run_forever(sinks=args.sink, backfill=args.backfill))
    stopper = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({runner, stopper}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(sig)
        stopper.cancel()
        await driver.close()
        await asyncio.wait({runner, stopper}, timeout=1.0)
    failure = runner.exception() if runner.done() and not runner.cancelled() else None
    if failure is not None:
        raise failure
    return _totals(driver)


def _totals(driver: ExportDriver) -> RunReport:
    observer = driver.observer
    reports: dict[str, SinkReport] = {}
    if isinstance(observer, CountingObserver):
        for name, c in observer.counters.items():
            reports[name] = SinkReport(
                name,
                batches=c.batches,
                partitions=c.partitions,
                rows=c.rows,
                bytes=c.bytes,
                files=c.files,
                retried=c.retries,
                lost=c.lost,
                lag_partitions=c.lag_partitions,
                lag_rows=c.lag_rows,
                errors=[c.last_error] if c.last_error else [],
            )
    return RunReport(reports)
