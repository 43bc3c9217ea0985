"""`run_tasks`: the most urgent ready task first, every task run once, errors raised after all stop."""

from __future__ import annotations

import threading

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hypaware.core.workers import Task, run_tasks


def test_one_worker_runs_the_most_urgent_ready_task_first() -> None:
    order: list[str] = []

    def step(name: str, then: list[Task] | None = None) -> Task:
        def fn() -> list[Task]:
            order.append(name)
            return then or []

        return Task(2 if name.startswith("read") else 0, fn)

    run_tasks([step("read-1", [step("write-1")]), step("read-2"), step("read-3")], workers=1)
    # write-1 became ready after read-1 and overtook the reads still waiting.
    assert order == ["read-1", "write-1", "read-2", "read-3"]


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=1, max_size=30), st.sampled_from([1, 2, 4]))
def test_every_task_and_every_follow_up_runs_once(fanout: list[int], workers: int) -> None:
    seen: list[tuple[int, int]] = []
    lock = threading.Lock()

    def leaf(i: int, j: int) -> Task:
        def fn() -> list[Task]:
            with lock:
                seen.append((i, j))
            return []

        return Task(0, fn)

    def root(i: int, n: int) -> Task:
        def fn() -> list[Task]:
            with lock:
                seen.append((i, -1))
            return [leaf(i, j) for j in range(n)]

        return Task(1, fn)

    run_tasks([root(i, n) for i, n in enumerate(fanout)], workers=workers)
    want = {(i, -1) for i in range(len(fanout))} | {
        (i, j) for i, n in enumerate(fanout) for j in range(n)
    }
    assert sorted(seen) == sorted(want)


def test_an_error_stops_new_tasks_and_waits_for_running_ones() -> None:
    started = threading.Event()
    release = threading.Event()
    finished: list[str] = []
    later: list[str] = []

    def slow() -> list[Task]:
        started.set()
        assert release.wait(20)
        finished.append("slow")
        return []

    def fails() -> list[Task]:
        assert started.wait(20)
        release.set()
        raise OSError("disk full")

    def never() -> list[Task]:
        later.append("ran")
        return []

    before = threading.active_count()
    tasks = [Task(0, slow), Task(0, fails), *(Task(1, never) for _ in range(5))]
    with pytest.raises(OSError, match="disk full"):
        run_tasks(tasks, workers=2)
    assert finished == ["slow"]  # the running task was waited for
    assert later == []  # nothing started after the error
    assert threading.active_count() == before  # no thread outlives the call
