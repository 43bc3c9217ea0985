"""Spreading CPU-bound file work over the cores this process may use.

pyarrow releases the GIL while it encodes, so threads put every core to
work; more encoders than cores would only add memory (each holds its own
row groups) and switching, so `cores` is the bound callers use.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["cores", "map_bounded"]

T = TypeVar("T")
R = TypeVar("R")


def cores() -> int:
    """The cores this process may run on (at least 1)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # pragma: no cover - not on Linux
        return max(1, os.cpu_count() or 1)


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
