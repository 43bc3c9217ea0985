"""``hypaware check-config FILE``: load and resolve a config without building anything."""

from __future__ import annotations

import argparse
import sys
from datetime import UTC, datetime
from typing import Any

from hypaware.core.config_loader import load_config
from hypaware.core.errors import ConfigError, PluginError
from hypaware.core.registry import Registry
from hypaware.core.resolver import resolve
from hypaware.core.schedule import next_fire


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "check-config",
        help="check a config file: shapes, plugins, schedules, plugin keys",
        description="Check a config file without building any sink. Exit status 0 when "
        "it is valid (one line per sink), 2 with every problem, one per line.",
    )
    parser.add_argument("file", help="path to the JSON config")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.file)
        plans = resolve(config, Registry.from_entry_points())
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    except PluginError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    now = datetime.now(UTC)
    if not plans:
        print(f"{args.file}: valid, no sinks configured")
    for plan in plans:
        fire = next_fire(plan.schedule, now).strftime("%Y-%m-%dT%H:%M:%SZ")
        query = "queryable" if plan.queryable else "not queryable"
        print(
            f"{plan.name}: {plan.shape} sink, {plan.describe()}, "
            f"schedule {plan.schedule!r}, next {fire}, {query}"
        )
    return 0
