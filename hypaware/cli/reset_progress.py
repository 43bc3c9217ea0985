"""``hypaware reset-progress [--config FILE] --sink S [--sink S ...] --from now|start [--yes]``.

Starts a sink's progress again: ``--from now`` skips everything sealed in
the cache so far (the sink receives only new partitions), ``--from start``
sends everything the cache still holds. Its respooled, parked and in-flight
partitions are forgotten, and its current destination is taken as its own
(the answer to a "destination changed" or "progress was lost" refusal).
The cache is never touched. Not on a terminal, it asks for ``--yes``.
``--sink`` may be repeated; every named sink is checked before any is reset.
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
from hypaware.cli.common import (
    ConfigMissingError,
    add_config_argument,
    config_path,
    error,
    errors,
)
from hypaware.cli.redact import redact_config
from hypaware.core.config import HypawareConfig
from hypaware.core.config_loader import load_config
from hypaware.core.errors import CacheError, ConfigError, StateError
from hypaware.core.registry import did_you_mean
from hypaware.export.identity import reset_progress
from hypaware.export.state import ProgressStore

__all__ = ["register", "run"]

COMMAND = "reset-progress"


def register(sub: Any) -> None:
    parser: argparse.ArgumentParser = sub.add_parser(
        COMMAND,
        help="start a sink's progress again, from now or from the start of the cache",
        description="Forget a sink's progress and start it again: from now (only new "
        "partitions) or from the start of what the cache holds. Deletes no cache data.",
    )
    add_config_argument(parser)
    parser.add_argument(
        "--sink",
        required=True,
        action="append",
        metavar="NAME",
        help="the sink to reset (repeat for several)",
    )
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
    source = None
    try:
        source = config_path(args)
        config = load_config(source)
    except (ConfigError, ConfigMissingError) as exc:
        return errors(COMMAND, exc, source)
    redact_config(getattr(args, "log_handler", None), config)
    names = [s.name for s in config.sinks]
    wanted = list(dict.fromkeys(args.sink))
    unknown = [s for s in wanted if s not in names]
    for name in unknown:
        error(COMMAND, f"no such sink {name!r}{did_you_mean(name, names)}")
    if unknown:
        return 2
    what = (
        "skip every partition sealed so far"
        if args.start == "now"
        else "send again everything the cache still holds"
    )
    which = ", ".join(repr(s) for s in wanted)
    plural = "s" if len(wanted) > 1 else ""
    if not args.yes:
        if not sys.stdin.isatty():
            error(
                COMMAND,
                f"reset-progress of sink{plural} {which} would {what}; "
                "not on a terminal, so confirm with --yes",
            )
            return 2
        answer = input(f"Reset the progress of sink{plural} {which} and {what}? [y/N] ")
        if answer.strip().lower() not in ("y", "yes"):
            print("nothing changed", file=sys.stderr)
            return 1
    for sink in wanted:
        code = _reset(config, sink, args.start)
        if code:
            return code
    return 0


def _reset(config: HypawareConfig, sink: str, start: str) -> int:
    try:
        high_waters = _high_waters(config, sink, start)
        with _sink_lock(config.state_path, sink) as locked:
            if not locked:
                error(COMMAND, f"sink {sink!r} is being exported right now; try again after")
                return 1
            store = ProgressStore(config.state_path)
            try:
                reset_progress(store, config.sink(sink), high_waters)
            finally:
                store.close()
    except (StateError, CacheError, OSError) as exc:
        error(COMMAND, exc)
        return 2
    marks = ", ".join(f"{ds}={hw}" for ds, hw in sorted(high_waters.items())) or "no datasets yet"
    print(f"sink {sink}: progress reset from {start} ({marks})")
    return 0
