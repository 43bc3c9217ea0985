"""Many files made durable at once; file work spread over the cores, in order."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypaware.cache.durable import fsync_all
from hypaware.core.workers import cores, map_bounded


@given(st.lists(st.integers()), st.integers(min_value=1, max_value=8))
def test_map_bounded_keeps_the_order_of_its_items(items: list[int], workers: int) -> None:
    assert map_bounded(lambda i: i * 2, items, workers=workers) == [i * 2 for i in items]


def test_map_bounded_runs_no_more_than_its_workers_and_leaves_no_thread() -> None:
    before = threading.active_count()
    running = 0
    peak = 0
    lock = threading.Lock()
    gate = threading.Barrier(2, timeout=10)

    def work(i: int) -> int:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        if i < 2:
            gate.wait()  # the first two meet: two really run at once
        with lock:
            running -= 1
        return i

    assert map_bounded(work, range(20), workers=2) == list(range(20))
    assert peak == 2
    assert threading.active_count() == before


def test_map_bounded_raises_the_first_error_after_the_others_stop() -> None:
    done: list[int] = []

    def work(i: int) -> int:
        if i == 3:
            raise ValueError("item 3 is bad")
        done.append(i)
        return i

    with pytest.raises(ValueError, match="item 3"):
        map_bounded(work, range(10), workers=2)
    assert 3 not in done


def test_fsync_all_syncs_every_file_and_names_a_missing_one(tmp_path: Path) -> None:
    paths = [tmp_path / f"f{i}" for i in range(5)]
    for p in paths:
        p.write_bytes(b"x")
    fsync_all(paths)
    with pytest.raises(FileNotFoundError) as info:
        fsync_all([*paths, tmp_path / "gone"])
    assert "gone" in str(info.value)


def test_cores_is_at_least_one() -> None:
    assert cores() >= 1
