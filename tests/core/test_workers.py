"""`run_tasks`: the most urgent ready task first, every task run once, errors raised after all stop."""

from __future__ import annotations

import sys
import threading
import time

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


def test_an_interrupt_of_the_calling_thread_stops_the_others_after_their_task(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import hypaware.core.workers as workers

    release = threading.Event()
    ran: list[str] = []

    class Interrupted(threading.Condition):
        def wait(self, timeout: float | None = None) -> bool:
            # Only run_tasks' own wait, not those of threading's events.
            mine = sys._getframe(1).f_code.co_name == "work"
            if mine and threading.current_thread() is threading.main_thread():
                release.set()  # the helper's running task may end now
                raise KeyboardInterrupt
            return super().wait(timeout)

    def leaf() -> list[Task]:
        ran.append("leaf")
        return []

    def slow() -> list[Task]:
        if threading.current_thread() is threading.main_thread():
            time.sleep(0.001)
            return [Task(0, slow)]  # left for a helper, so this thread waits
        assert release.wait(20)
        return [Task(1, leaf) for _ in range(10)]

    monkeypatch.setattr(workers.threading, "Condition", Interrupted)
    before = threading.active_count()
    with pytest.raises(KeyboardInterrupt):
        run_tasks([Task(0, slow)], workers=2)
    monkeypatch.undo()
    assert ran == []  # what the running task made was not worked through
    assert threading.active_count() == before
