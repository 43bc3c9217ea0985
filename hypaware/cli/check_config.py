"""``hypaware check-config [--config] FILE``: every check of a config, without building anything."""

from __future__ import annotations

import argparse
import json
import sys
from datetime import UTC, datetime
from typing import Any

from hypaware.cli.common import (
    ConfigMissingError,
    add_config_argument,
    config_path,
    errors,
    iso_utc,
)
from hypaware.cli.redact import redact_plans
from hypaware.cli.status import state_warnings
from hypaware.core.checks import check_config
from hypaware.core.errors import ConfigError, PluginError
from hypaware.core.schedule import next_fire


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "check-config",
        help="check a config file: shapes, names, plugins, pairs, keys, schedules, extras",
        description="Check a config file without building any sink, reporting every problem "
        "in one run. Exit status 0 when it is valid (one line per sink), 2 with every "
        "problem, one per line. The other commands run the same checks first.",
    )
    add_config_argument(parser, positional=True)
    parser.add_argument(
        "--json",
        action="store_true",
        help='print {"ok": ..., "sinks": [...], "problems": [{"path", "message"}]} on stdout',
    )
    parser.add_argument(
        "--state",
        action="store_true",
        help="also compare each sink with its recorded progress: warn about a changed "
        "destination or a lost progress store, which `hypaware export` would refuse",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    path = None
    try:
        path = config_path(args)
        config, plans = check_config(path)
    except ConfigMissingError as exc:
        return errors("check-config", exc)
    except (ConfigError, PluginError) as exc:
        if args.json:
            found = (
                [{"path": p.path, "message": p.message} for p in exc.problems]
                if isinstance(exc, ConfigError)
                else [{"path": "", "message": str(exc)}]
            )
            doc = {"ok": False, "config": path, "sinks": [], "problems": found}
            print(json.dumps(doc, indent=2))
        return errors("check-config", exc, path)
    redact_plans(getattr(args, "log_handler", None), plans)
    warnings = state_warnings(config) if getattr(args, "state", False) else []
    for warning in warnings:
        print(f"hypaware check-config: warning: {warning}", file=sys.stderr)
    now = datetime.now(UTC)
    sinks = [
        {
            "name": plan.name,
            "shape": plan.shape,
            "plugins": plan.describe(),
            "schedule": plan.schedule,
            "next": iso_utc(next_fire(plan.schedule, now)),
            "queryable": plan.queryable,
        }
        for plan in plans
    ]
    if args.json:
        valid: dict[str, Any] = {"ok": True, "config": path, "sinks": sinks, "problems": []}
        print(json.dumps({**valid, "warnings": warnings}, indent=2))
        return 0
    if not plans:
        print(f"{path}: valid, no sinks configured")
    for s in sinks:
        query = "queryable" if s["queryable"] else "not queryable"
        print(
            f"{s['name']}: {s['shape']} sink, {s['plugins']}, "
            f"schedule {s['schedule']!r}, next {s['next']}, {query}"
        )
    return 0
