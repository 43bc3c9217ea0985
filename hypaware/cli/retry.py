"""``hypaware retry [--config FILE] [--sink S ...] [--dataset D] [--all]``: parked partitions back.

A partition is parked when it failed in a way another slot cannot fix (see
docs/export.md). After fixing the cause (a token, a bucket, a column type),
``retry`` respools the parked partitions of a sink, of a dataset, or all of
them; the next pass of their sink sends them. ``--sink`` may be repeated.
Exit status: 0, or 2 for an unknown sink or dataset (with a did-you-mean)
or an unusable config.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from hypaware.cache.local import LocalCache
from hypaware.cli.common import (
    ConfigMissingError,
    add_config_argument,
    config_path,
    error,
    errors,
)
from hypaware.cli.redact import redact_config
from hypaware.core.config_loader import load_config
from hypaware.core.errors import CacheError, ConfigError, StateError
from hypaware.core.registry import did_you_mean
from hypaware.export.state import STATE_FILE, ProgressStore

__all__ = ["register", "run"]

COMMAND = "retry"


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        COMMAND,
        help="put parked partitions back in line",
        description="Respool parked partitions (of one sink, one dataset, or all of them) "
        "so the next pass of their sink sends them again. Nothing is deleted.",
    )
    add_config_argument(parser)
    parser.add_argument(
        "--sink",
        action="append",
        metavar="NAME",
        help="only this sink's parked partitions (repeat for several)",
    )
    parser.add_argument("--dataset", metavar="NAME", help="only this dataset's parked partitions")
    parser.add_argument("--all", action="store_true", help="every parked partition of every sink")
    parser.add_argument("--json", action="store_true", help="print what was put back as JSON")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if not (args.sink or args.dataset or args.all):
        error(COMMAND, "say which parked partitions: --sink, --dataset or --all")
        return 2
    source = None
    try:
        source = config_path(args)
        config = load_config(source)
        redact_config(getattr(args, "log_handler", None), config)
        state_file = config.state_path / STATE_FILE
        store = ProgressStore(config.state_path, create=False) if state_file.exists() else None
    except (ConfigError, ConfigMissingError) as exc:
        return errors(COMMAND, exc, source)
    except StateError as exc:
        error(COMMAND, exc)
        return 2
    try:
        sinks = {s.name for s in config.sinks} | set(store.sinks() if store else [])
        unknown = [s for s in args.sink or [] if s not in sinks]
        for name in unknown:
            error(COMMAND, f"no such sink {name!r}{did_you_mean(name, sinks)}")
        if unknown:
            return 2
        if args.dataset is not None:
            try:
                known = {d.name for d in LocalCache.from_config(config).datasets()}
            except CacheError:
                known = set()
            if store is not None:
                known |= {p.dataset for p in store.parked()}
            if args.dataset not in known:
                hint = did_you_mean(args.dataset, known)
                error(COMMAND, f"no such dataset {args.dataset!r}{hint}")
                return 2
        back = []
        if store is not None:
            for name in dict.fromkeys(args.sink or [None]):
                back += store.unpark(name, args.dataset)
    except StateError as exc:
        error(COMMAND, exc)
        return 2
    finally:
        if store is not None:
            store.close()
    if args.json or not sys.stdout.isatty():
        doc = [
            {"sink": p.sink, "dataset": p.dataset, "partition": p.partition_id, "reason": p.reason}
            for p in back
        ]
        print(json.dumps({"retried": len(back), "partitions": doc}, sort_keys=True))
        return 0
    if not back:
        print("nothing parked to retry")
    by_sink: dict[str, int] = {}
    for p in back:
        by_sink[p.sink] = by_sink.get(p.sink, 0) + 1
    for sink, count in sorted(by_sink.items()):
        print(f"sink {sink}: {count} parked partitions put back in line for its next pass")
    return 0
