"""Before a driver's first pass: bind the progress store to its cache, fix new sinks' starts.

Both happen the moment a driver first runs (``run_once``, ``run_forever``,
``export --once``), not at a sink's first scheduled pass, so nothing sealed
between start-up and that pass is left behind.

- **Binding** (`bind`): the cache's identity (`Cache.identity`, or a stand-in
  kept in the progress store for a host cache that has none, with a WARNING)
  is compared with the one the store tracks; a different cache is started
  from its own beginning (`hypaware.export.binding`), with a WARNING, an
  observer ``error`` and a line in every sink's report.
  One progress store tracks one cache at a time: a driver holds a shared
  lock on ``<state_dir>/locks/cache.lock`` for as long as it is bound, and
  starting the store on another cache needs that lock exclusively. So two
  drivers of different caches on one state directory never take turns
  resetting each other's progress: the second is refused, naming the file.
- **Start points** (`fix_start`): a sink the store has never seen starts
  every dataset already in the cache at its newest sealed partition. What is
  sealed at or below it is "before the start point": counted in the log,
  the report's ledger and ``status``, and sent by a backfill. A dataset that
  appears after the sink was first seen starts at its beginning.
"""

from __future__ import annotations

import fcntl
import logging
import os
from datetime import datetime

import attrs

from hypaware.cache.identity import check_identity, new_identity
from hypaware.cache.protocol import Cache, declared_identity
from hypaware.core.errors import StateError
from hypaware.core.types import DatasetInfo
from hypaware.export.binding import CacheChange
from hypaware.export.fanout import ObserverFanout
from hypaware.export.identity import check_sink
from hypaware.export.runner import SinkRunner
from hypaware.export.state import ProgressStore

__all__ = ["Binding", "bind", "fix_start"]

log = logging.getLogger("hypaware.export.driver")


@attrs.frozen
class Binding:
    """The cache a driver exports: its identity, whether it is a stand-in, and a change met."""

    identity: str
    standin: bool = False
    change: CacheChange | None = None
    lock: int | None = attrs.field(default=None, repr=False)

    def release(self) -> None:
        """Let another driver bind the store (`ExportDriver.close()` calls it)."""
        if self.lock is not None:
            os.close(self.lock)  # closing the descriptor drops its flock
            object.__setattr__(self, "lock", None)

    def notices(self) -> list[str]:
        """What every report of this driver says about its cache (empty when all is usual)."""
        out = []
        if self.standin:
            out.append(
                f"the cache has no identity of its own; the progress store's stand-in "
                f"{self.identity} names it, so a wiped or replaced cache cannot be detected"
            )
        if self.change is not None:
            out.append(self.change.describe())
        return out


def bind(cache: Cache, state: ProgressStore, observe: ObserverFanout) -> Binding:
    """Bind `state` to `cache` (see the module doc). Raises `CacheError` or `StateError`."""
    lock = _lock(state)
    try:
        binding = _bind(cache, state, observe, lock)
    except BaseException:
        os.close(lock)
        raise
    return binding


def _lock(state: ProgressStore) -> int:
    path = state.state_dir / "locks" / "cache.lock"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        raise StateError(f"cannot open the cache lock {path}: {exc}") from exc
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise StateError(
            f"the progress store {state.path} is being moved to another cache by another "
            f"driver ({path} is held); try again when it is done"
        ) from None
    return fd


def _bind(cache: Cache, state: ProgressStore, observe: ObserverFanout, lock: int) -> Binding:
    raw = declared_identity(cache)
    standin = raw is None
    if standin:
        identity = state.standin_identity(new_identity)
        log.warning(
            "the cache %s has no identity (Cache.identity); using the stand-in %s kept in %s. "
            "A wiped or replaced cache cannot be told apart from this one (docs/embedding.md)",
            type(cache).__name__,
            identity,
            state.path,
            extra={"cache_identity": identity},
        )
    else:
        identity = check_identity(raw, f"the identity of the cache {type(cache).__name__}")
    tracked = state.cache_identity()
    moving = tracked is not None and tracked != identity
    if moving:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise StateError(
                f"the progress store {state.path} tracks the cache {tracked}, and a driver of "
                f"that cache is running ({state.state_dir / 'locks' / 'cache.lock'} is held): "
                f"a driver of the cache {identity} ({type(cache).__name__}) cannot share its "
                "state directory. Give each cache its own state_dir"
            ) from None
    change = state.bind_cache(identity, may_change=moving)
    fcntl.flock(lock, fcntl.LOCK_SH)
    if change is not None:
        log.warning(
            "%s",
            change.describe(),
            extra={
                "cache_identity": identity,
                "old_cache_identity": change.old_identity,
                "archived_partitions": change.lost,
            },
        )
        observe.error(None, change.describe())
    return Binding(identity, standin, change, lock)


def fix_start(
    cache: Cache,
    state: ProgressStore,
    runner: SinkRunner,
    observe: ObserverFanout,
    *,
    backfill: bool = False,
    now: datetime | None = None,
) -> None:
    """Record where `runner`'s sink starts each dataset, if the store has never seen it.

    `now` is the driver's clock, so a start point reads in the driver's time.

    A sink whose state is refused (a lost progress store, a changed
    destination) is left to its pass, which reports why; its start is fixed
    once the operator has said what they mean. With `backfill` the partitions
    before the start are about to be sent, and the log says so at INFO.
    Raises `CacheError`/`StateError`.
    """
    name = runner.name
    if state.seen(name):
        return
    try:
        check = check_sink(state, runner.spec, backfill=False, built=runner.sink is not None)
    except (StateError, OSError):
        return
    if check.error is not None:
        return
    if not state.see_sink(name, now):
        return
    wanted = runner.spec.datasets
    for info in cache.datasets():
        if wanted is None or info.name in wanted:
            _start_dataset(cache, state, name, info, observe, backfill=backfill, now=now)


def _start_dataset(
    cache: Cache,
    state: ProgressStore,
    name: str,
    info: DatasetInfo,
    observe: ObserverFanout,
    *,
    backfill: bool,
    now: datetime | None,
) -> None:
    """Start `name` on `info` after what is sealed now; say what that leaves out."""
    ready = list(cache.ready_partitions(info.name))
    start = state.start(name, info.name, max((p.seq for p in ready), default=0), now)
    before = [p for p in ready if p.seq <= start]
    rows = sum(p.row_count for p in before)
    extra = {
        "sink": name,
        "dataset": info.name,
        "start_seq": start,
        "before_start_partitions": len(before),
        "before_start_rows": rows,
    }
    if before and backfill:
        log.info(
            "sink %s: dataset %s starts after seq %d; this backfill sends the %d sealed "
            "partitions (%d rows) before it",
            name,
            info.name,
            start,
            len(before),
            rows,
            extra=extra,
        )
    elif before:
        log.warning(
            "sink %s: dataset %s starts after seq %d: %d sealed partitions (%d rows) "
            "before it are not exported; run with --backfill to send them",
            name,
            info.name,
            start,
            len(before),
            rows,
            extra=extra,
        )
    else:
        log.info("sink %s starts dataset %s at its beginning", name, info.name, extra=extra)
    observe.dataset_started(
        name, info.name, high_water=start, skipped_partitions=len(before), skipped_rows=rows
    )
