"""``hypaware export --config FILE [--once] [--sink NAME] [--backfill]``.

Scheduled (without ``--once``), it first prints per sink its schedule and
next pass (UTC). On a terminal: a live line of per-sink totals while it runs
and a table at the end. Otherwise: one line per pass on stderr, and one
JSON summary on stdout at the end. Log records never land inside the live
line. Exit status: 0 when every sink exported cleanly, 1 when some sink
failed, parked or left partitions to retry, or refused its state, 2 for a
configuration that cannot be used.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from collections.abc import Sequence
from datetime import datetime
from typing import Any, TextIO

from hypaware.cli.common import add_config_argument, checked_config, error, errors, print_table
from hypaware.cli.logs import LineAwareHandler
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
    add_config_argument(parser)
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
        help="also send every sealed partition from before each sink's start point "
        "that it has not been sent",
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

    def __init__(
        self, stream: TextIO, sinks: Sequence[str], *, live: bool, scheduled: bool = False
    ) -> None:
        super().__init__()
        self.stream = stream
        self.live = live
        self.scheduled = scheduled
        for name in sinks:
            self.of(name)
        self._width = 0

    def say(self, text: str) -> None:
        """Print a line of its own, above the live line."""
        self.clear()
        self.stream.write(text + "\n")
        self.stream.flush()
        self.redraw()

    def clear(self) -> None:
        if self.live and self._width:
            self.stream.write("\r" + " " * self._width + "\r")
            self.stream.flush()
            self._width = 0

    def sink_scheduled(self, sink: str, schedule: str, next_slot: datetime | None) -> None:
        when = "none (the schedule gives no next time)"
        if next_slot is not None:
            when = next_slot.strftime("%Y-%m-%dT%H:%M:%SZ")
        self.say(f"sink {sink}: schedule {schedule!r} (UTC), next pass at {when}")

    def pass_finished(self, sink: str, report: SinkReport) -> None:
        super().pass_finished(sink, report)
        if self.scheduled and not self.live:
            text = (
                f"sink {sink}: pass done: {report.partitions} partitions, {report.rows:,} rows, "
                f"{format_bytes(report.bytes)}"
            )
            if report.failures or report.errors:
                text += f"; {report.failed_partitions} failed, {report.parked} parked"
                text += f"; {len(report.errors)} errors, first: {report.errors[0]}"
            self.say(text)
        else:
            self.redraw()

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
        ("SINK", "PARTITIONS", "ROWS", "BYTES", "FILES", "RETRIES", "PARKED", "LAG", "ERROR")
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
                str(c.parked),
                f"{c.lag_partitions} ({c.lag_rows:,} rows)",
                c.last_error or "-",
            )
        )
    return rows


def report_json(report: RunReport) -> dict[str, Any]:
    return {
        "ok": report.ok,
        # Each name says what it counts: the sum over sinks, or the cache's distinct rows.
        "sink_partitions": report.partitions,
        "sink_rows": report.rows,
        "cache_partitions": report.cache_partitions,
        "cache_rows": report.cache_rows,
        "errors": report.errors,
        "sinks": {name: r.as_dict() for name, r in report.sinks.items()},
    }


def run(args: argparse.Namespace) -> int:
    checked = checked_config("export", args)
    if isinstance(checked, int):
        return checked
    # The config check gave the log filter the plans' secrets (hypaware.cli.logs).
    config, plans = checked
    names = args.sink or [s.name for s in config.sinks]
    tty = sys.stdout.isatty() and not args.json
    display = ProgressDisplay(
        sys.stderr, names, live=tty and sys.stderr.isatty(), scheduled=not args.once
    )
    handler = getattr(args, "log_handler", None)
    if isinstance(handler, LineAwareHandler) and display.live:
        handler.line = display
    try:
        return asyncio.run(_main(args, config, plans, display, tty))
    except (ConfigError, PluginError, StateError) as exc:
        display.finish()
        if isinstance(exc, StateError):
            error("export", exc)
            return 2
        return errors("export", exc)


async def _main(
    args: argparse.Namespace, config: Any, plans: Any, display: ProgressDisplay, tty: bool
) -> int:
    # The plans the config check resolved: the registry is not loaded a second time.
    driver = ExportDriver.from_config(config, observer=display, plans=plans)
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
                parked=c.parked,
                errors=[c.last_error] if c.last_error else [],
            )
    return RunReport(reports)
