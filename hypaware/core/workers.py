"""Spreading CPU-bound file work over the cores this process may use.

pyarrow releases the GIL while it encodes, so threads put every core to
work; more encoders than cores would only add memory (each holds its own
row groups) and switching, so `cores` is the bound callers use.
"""

from __future__ import annotations

import heapq
import itertools
import os
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["Task", "cores", "map_bounded", "run_tasks"]

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


class Task:
    """One piece of work for `run_tasks`: `fn` returns the tasks it makes ready.

    Lower `priority` runs first; tasks of one priority run in the order they
    became ready.
    """

    __slots__ = ("fn", "priority")

    def __init__(self, priority: int, fn: Callable[[], Iterable[Task]]) -> None:
        self.priority = priority
        self.fn = fn


def run_tasks(tasks: Iterable[Task], *, workers: int) -> None:
    """Run `tasks` and every task they make ready, on up to `workers` threads.

    A thread that comes free takes the most urgent ready task, so work that
    finishes a pipeline (an encode) overtakes work that feeds it (a read),
    keeping memory low and every core busy. The threads take tasks
    themselves, with no dispatcher between a task's end and the next one's
    start; the calling thread is one of them. The first error stops new
    tasks from starting and is raised once the running ones have finished:
    no thread outlives this call.
    """
    counter = itertools.count()
    ready: list[tuple[int, int, Task]] = []

    def push(new: Iterable[Task]) -> None:
        for task in new:
            heapq.heappush(ready, (task.priority, next(counter), task))

    push(tasks)
    if workers <= 1:
        while ready:
            push(heapq.heappop(ready)[2].fn())
        return
    cond = threading.Condition()
    running = 0
    errors: list[BaseException] = []

    def work() -> None:
        nonlocal running
        while True:
            with cond:
                # Nothing ready but a task still running: it may make more.
                while not ready and running and not errors:
                    cond.wait()
                if errors or not ready:
                    cond.notify_all()
                    return
                task = heapq.heappop(ready)[2]
                running += 1
            failed: BaseException | None = None
            try:
                made = list(task.fn())
            except BaseException as exc:
                made, failed = [], exc
            with cond:
                running -= 1
                if failed is not None:
                    errors.append(failed)
                push(made)
                cond.notify_all()

    started: list[threading.Thread] = []
    try:
        for i in range(workers - 1):
            thread = threading.Thread(target=work, name=f"hypaware-worker-{i}", daemon=True)
            started.append(thread)
            thread.start()
        work()
    except BaseException as exc:
        # Interrupted (Ctrl-C) or unable to start a thread: the others stop after
        # their running task instead of working through what is left, or waiting
        # for a task of this thread that will never end.
        with cond:
            errors.append(exc)
            cond.notify_all()
        raise
    finally:
        for thread in started:
            if thread.ident is not None:  # it did start
                thread.join()
    if errors:
        raise errors[0]
