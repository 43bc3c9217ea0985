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


class _TaskRun:
    """The state `run_tasks` shares between its threads: the ready heap and who is busy.

    The heap is ordered by priority, then by the order tasks became ready.
    """

    def __init__(self) -> None:
        self._counter = itertools.count()
        self._ready: list[tuple[int, int, Task]] = []
        self._cond = threading.Condition()
        self._running = 0
        self._errors: list[BaseException] = []

    def push(self, new: Iterable[Task]) -> None:
        for task in new:
            heapq.heappush(self._ready, (task.priority, next(self._counter), task))

    def run_inline(self) -> None:
        while self._ready:
            self.push(heapq.heappop(self._ready)[2].fn())

    def run_threads(self, workers: int) -> None:
        """Work on this thread and `workers - 1` more; raise the first error once all stop."""
        started: list[threading.Thread] = []
        try:
            for i in range(workers - 1):
                thread = threading.Thread(
                    target=self.work, name=f"hypaware-worker-{i}", daemon=True
                )
                started.append(thread)
                thread.start()
            self.work()
        except BaseException as exc:
            # Interrupted (Ctrl-C) or unable to start a thread: the others stop after
            # their running task instead of working through what is left, or waiting
            # for a task of this thread that will never end.
            with self._cond:
                self._errors.append(exc)
                self._cond.notify_all()
            raise
        finally:
            for thread in started:
                if thread.ident is not None:  # it did start
                    thread.join()
        if self._errors:
            raise self._errors[0]

    def work(self) -> None:
        """Run the most urgent ready task, again and again, until none is left or one failed."""
        while True:
            with self._cond:
                # Nothing ready but a task still running: it may make more.
                while not self._ready and self._running and not self._errors:
                    self._cond.wait()
                if self._errors or not self._ready:
                    self._cond.notify_all()
                    return
                task = heapq.heappop(self._ready)[2]
                self._running += 1
            self._run(task)

    def _run(self, task: Task) -> None:
        failed: BaseException | None = None
        try:
            made = list(task.fn())
        except BaseException as exc:
            made, failed = [], exc
        with self._cond:
            self._running -= 1
            if failed is not None:
                self._errors.append(failed)
            self.push(made)
            self._cond.notify_all()


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
    run = _TaskRun()
    run.push(tasks)
    if workers <= 1:
        run.run_inline()
        return
    run.run_threads(workers)
