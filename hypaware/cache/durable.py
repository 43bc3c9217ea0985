"""Making many files durable at once, and running CPU-bound file work on every core.

An fsync waits for the disk, not the CPU: issued one after another, hundreds
of them (one per partition of a seal) cost hundreds of journal commits.
Issued from several threads at once, the filesystem folds them into a few
commits. `fsync_all` does that; `cores` is how many encoders may run at once
(pyarrow releases the GIL while it encodes, so threads use every core).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypeVar

__all__ = ["IO_WORKERS", "cores", "fsync_all", "map_bounded"]

# Enough waiters for the filesystem to batch their journal commits; they use no CPU.
IO_WORKERS = 16

T = TypeVar("T")
R = TypeVar("R")


def cores() -> int:
    """The cores this process may run on (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


def fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_all(paths: Sequence[Path]) -> None:
    """Fsync every file of `paths`; returns when all are durable, raises the first error."""
    map_bounded(fsync_file, paths, workers=IO_WORKERS)


def map_bounded(fn: Callable[[T], R], items: Iterable[T], *, workers: int) -> list[R]:
    """``[fn(i) for i in items]`` on up to `workers` threads, results in order.

    Every call has finished (or was never started) when this returns or raises:
    no thread outlives it.
    """
    work = list(items)
    if len(work) <= 1 or workers <= 1:
        return [fn(i) for i in work]
    with ThreadPoolExecutor(max_workers=min(workers, len(work))) as pool:
        futures = [pool.submit(fn, i) for i in work]
        try:
            return [f.result() for f in futures]
        finally:
            for f in futures:
                f.cancel()
