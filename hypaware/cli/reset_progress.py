"""``hypaware reset-progress --config FILE --sink S --from now|start [--yes]``.

Starts a sink's progress again: ``--from now`` skips everything sealed in
the cache so far (the sink receives only new partitions), ``--from start``
sends everything the cache still holds. Its respooled, parked and in-flight
partitions are forgotten, and its current destination is taken as its own
(the answer to a "destination changed" or "progress was lost" refusal).
The cache is never touched. Not on a terminal, it asks for ``--yes``.
Exit status: 0, 1 when the sink is being exported right now, 2 for an
unknown sink or dataset, a missing ``--yes`` or an unusable config.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from hypaware.cache.local import LocalCache
from hypaware.cli.redact import redact_config
from hypaware.core.config import HypawareConfig
from hypaware.core.config_loader import load_config
from hypaware.core.errors import CacheError, ConfigError, StateError
from hypaware.core.registry import did_you_mean
from hypaware.export.identity import reset_progress
from hypaware.export.state import ProgressStore

__all__ = ["register", "run"]


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        "reset-progress",
        help="start a sink's progress again, from now or from the start of the cache",
        description="Forget a sink's progress and start it again: from now (only new "
        "partitions) or from the start of what the cache holds. Deletes no cache data.",
    )
    parser.add_argument("--config", required=True, metavar="FILE", help="path to the JSON config")
    parser.add_argument("--sink", required=True, metavar="NAME", help="the sink to reset")
    parser.add_argument(
        "--from",
        dest="start",
        required=True,
        choices=("now", "start"),
        help="now: skip what is sealed already; start: send everything the cache holds",
    )
    parser.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    parser.set_defaults(func=run)


def _high_waters(config: HypawareConfig, sink: str, start: str) -> dict[str, int]:
    cache = LocalCache.from_config(config)
    wanted = config.sink(sink).datasets
    out: dict[str, int] = {}
    for info in cache.datasets():
        if wanted is not None and info.name not in wanted:
            continue
        if start == "now":
            out[info.name] = max((p.seq for p in cache.ready_partitions(info.name)), default=0)
        else:
            out[info.name] = 0
    return out


@contextlib.contextmanager
def _sink_lock(state_dir: Path, sink: str) -> Iterator[bool]:
    """The sink's export lock, so a reset never races a running export."""
    locks = state_dir / "locks"
    locks.mkdir(parents=True, exist_ok=True)
    fd = os.open(locks / f"{sink}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            yield False
            return
        yield True
    finally:
        os.close(fd)


def run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
    except ConfigError as exc:
        for problem in exc.problems:
            print(f"error: {problem}", file=sys.stderr)
        return 2
    redact_config(getattr(args, "log_handler", None), config)
    names = [s.name for s in config.sinks]
    if args.sink not in names:
        print(f"error: no such sink {args.sink!r}{did_you_mean(args.sink, names)}", file=sys.stderr)
        return 2
    what = (
        "skip every partition sealed so far"
        if args.start == "now"
        else "send again everything the cache still holds"
    )
    if not args.yes:
        if not sys.stdin.isatty():
            print(
                f"error: reset-progress of sink {args.sink!r} would {what}; "
                "not on a terminal, so confirm with --yes",
                file=sys.stderr,
            )
            return 2
        answer = input(f"Reset the progress of sink {args.sink!r} and {what}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing changed", file=sys.stderr)
            return 1
    try:
        high_waters = _high_waters(config, args.sink, args.start)
        with _sink_lock(config.state_path, args.sink) as locked:
            if not locked:
                print(
                    f"error: sink {args.sink!r} is being exported right now; try again after",
                    file=sys.stderr,
                )
                return 1
            store = ProgressStore(config.state_path)
            try:
                reset_progress(store, config.sink(args.sink), high_waters)
            finally:
                store.close()
    except (StateError, CacheError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    marks = ", ".join(f"{ds}={hw}" for ds, hw in sorted(high_waters.items())) or "no datasets yet"
    print(f"sink {args.sink}: progress reset from {args.start} ({marks})")
    return 0
