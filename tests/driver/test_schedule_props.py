"""Property tests of the schedule: agreement with croniter, and no slot fired twice."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from croniter import croniter
from hypothesis import given
from hypothesis import strategies as st

from hypaware.core.schedule import check_schedule, next_fire
from hypaware.export.slots import next_slot

MINUTE = st.sampled_from(["*", "*/5", "0", "15,45", "0-10/3", "59"])
HOUR = st.sampled_from(["*", "*/2", "0", "9-17", "23"])
DOM = st.sampled_from(["*", "1", "15", "28", "31", "1-7"])
MONTH = st.sampled_from(["*", "1", "2", "*/3", "12"])
DOW = st.sampled_from(["*", "0", "1-5", "6", "MON,WED"])
EXPRS = st.tuples(MINUTE, HOUR, DOM, MONTH, DOW).map(" ".join)
TIMES = st.datetimes(
    min_value=datetime(2020, 1, 1), max_value=datetime(2035, 1, 1), timezones=st.just(UTC)
)


@given(EXPRS, TIMES)
def test_next_fire_agrees_with_croniter(expr: str, after: datetime) -> None:
    if check_schedule(expr) is not None:
        return
    ours = next_fire(expr, after)
    theirs = croniter(expr, after).get_next(datetime)
    assert ours == theirs
    assert ours > after
    assert ours.tzinfo is not None and ours.utcoffset() == timedelta(0)
    assert croniter.match(expr, ours)


@given(EXPRS, TIMES, st.lists(st.integers(-7200, 86_400), min_size=1, max_size=30))
def test_a_slot_never_fires_twice(expr: str, start: datetime, steps: list[int]) -> None:
    """Whatever the clock does (including stepping back), fired slots strictly increase."""
    if check_schedule(expr) is not None:
        return
    now = start
    last: datetime | None = None
    fired: list[datetime] = []
    for step in steps:
        slot = next_slot(expr, now, last)
        assert croniter.match(expr, slot)
        assert slot > now
        if last is not None:
            assert slot > last
        # The driver sleeps until the slot; the clock may then read later, or earlier.
        now = slot + timedelta(seconds=step)
        last = slot
        fired.append(slot)
    assert len(set(fired)) == len(fired)
    assert fired == sorted(fired)
