"""A sink whose destination is at fault halts: nothing parks, it is tried on a capped ladder
between its slots, and rows flow again on their own once the cause is fixed."""

from __future__ import annotations

import asyncio
from collections import Counter
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from hypaware.core.types import ExportBatch, ExportOptions, ExportResult
from hypaware.export.driver import ExportDriver
from hypaware.export.halts import HALT_BASE_SECONDS, HALT_CAP_SECONDS, halt_delay
from hypaware.export.observer import CountingObserver
from hypaware.export.state import ProgressStore
from tests.timing import PROMPT

from .helpers import T0, ManualClock, make_cache, spec


class FlakyDestination:
    """Answers like a server with a wrong token until `fixed`; records when it was tried."""

    def __init__(self, clock: ManualClock) -> None:
        self.clock = clock
        self.fixed = False
        self.tried_at: list[datetime] = []
        self.acks: Counter[str] = Counter()

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        self.tried_at.append(self.clock.now())
        if not self.fixed:
            reason = "the endpoint rejected the credentials; check the token (401)"
            return ExportResult.failed(batch, reason, retryable=False, sink_fault=True)
        for part in batch.partitions:
            self.acks[part.id] += 1
        return ExportResult(exported=[p.id for p in batch.partitions])

    async def close(self) -> None:
        return None


@given(st.integers(1, 10_000))
def test_the_ladder_never_spins_and_never_waits_past_its_cap(attempts: int) -> None:
    delay = halt_delay(attempts)
    assert HALT_BASE_SECONDS <= delay <= HALT_CAP_SECONDS
    assert halt_delay(attempts + 1) >= delay
    if attempts > 1:
        assert delay <= 2 * halt_delay(attempts - 1)


async def test_a_halted_sink_is_tried_between_slots_and_resumes_once_fixed(
    tmp_path: Path,
) -> None:
    cache = make_cache(tmp_path / "cache", count=12)
    clock = ManualClock(T0)
    dest = FlakyDestination(clock)
    counting = CountingObserver()
    driver = ExportDriver(
        cache,
        [(spec("central", schedule="0 * * * *"), dest)],
        state=tmp_path / "state",
        clock=clock,
        observer=counting,
    )
    task = asyncio.ensure_future(driver.run_forever(backfill=True))
    try:
        await clock.advance(timedelta(0), sleepers=1)
        await clock.advance(timedelta(hours=1), sleepers=1)  # 01:00, the slot: refused
        halt = driver.state.halted("central")
        assert halt is not None and halt.attempts == 1
        assert halt.next_try == T0 + timedelta(hours=1, seconds=HALT_BASE_SECONDS)
        assert counting.of("central").halted is not None
        assert driver.parked("central") == []
        await clock.advance(timedelta(seconds=HALT_BASE_SECONDS), sleepers=1)  # a try
        assert len(dest.tried_at) == 2
        assert driver.state.halted("central").attempts == 2  # type: ignore[union-attr]
        # The token is fixed; the next try on the ladder sends everything, no retry.
        dest.fixed = True
        await clock.advance(timedelta(seconds=2 * HALT_BASE_SECONDS), sleepers=1)
        assert driver.state.halted("central") is None
        assert counting.of("central").halted is None and counting.of("central").halts == 1
        sealed = {p.id for p in cache.ready_partitions("events")}
        assert set(dest.acks) == sealed and set(dest.acks.values()) == {1}
        # Tried at the slot and on the ladder, never in between.
        assert dest.tried_at[:3] == [
            T0 + timedelta(hours=1),
            T0 + timedelta(hours=1, seconds=30),
            T0 + timedelta(hours=1, seconds=90),
        ]
        assert driver.parked("central") == []
    finally:
        await driver.close()
        await asyncio.wait_for(task, PROMPT)


async def test_a_halt_survives_a_restart_and_run_once_tries_at_once(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=6)
    clock = ManualClock(T0)
    dest = FlakyDestination(clock)
    driver = ExportDriver(cache, [(spec("central"), dest)], state=tmp_path / "state", clock=clock)
    try:
        report = await driver.run_once(backfill=True)
        r = report.sinks["central"]
        assert not report.ok and r.halted is not None and r.parked == 0
        assert "401" in r.halted["reason"]
        # An explicit pass does not wait out the ladder: the operator asked for it now.
        report = await driver.run_once(backfill=True)
        assert len(dest.tried_at) == 2 and report.sinks["central"].halted["attempts"] == 2  # type: ignore[index]
    finally:
        await driver.close()
    store = ProgressStore(tmp_path / "state")
    try:
        kept = store.halted("central")
        assert kept is not None and kept.attempts == 2 and kept.since == T0
    finally:
        store.close()
    dest.fixed = True
    driver = ExportDriver(cache, [(spec("central"), dest)], state=tmp_path / "state", clock=clock)
    try:
        report = await driver.run_once(backfill=True)
        assert report.ok, report.errors
        assert driver.state.halted("central") is None
    finally:
        await driver.close()


async def test_other_sinks_are_not_held_back(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=6)
    clock = ManualClock(T0)
    down, up = FlakyDestination(clock), FlakyDestination(clock)
    up.fixed = True
    driver = ExportDriver(
        cache,
        [(spec("down"), down), (spec("up"), up)],
        state=tmp_path / "state",
        clock=clock,
    )
    try:
        report = await driver.run_once(backfill=True)
        assert report.sinks["up"].ok and report.sinks["down"].halted is not None
        assert set(up.acks) == {p.id for p in cache.ready_partitions("events")}
    finally:
        await driver.close()


def test_a_halt_keeps_its_start_and_climbs(tmp_path: Path) -> None:
    store = ProgressStore(tmp_path / "state")
    try:
        t = datetime(2026, 1, 1, tzinfo=UTC)
        first = store.halt("s", "403", t)
        later = store.halt("s", "403 again", t + timedelta(minutes=5))
        assert later.since == first.since == t and later.attempts == 2
        assert later.next_try == t + timedelta(minutes=5, seconds=halt_delay(2))
        assert store.resume("s") == later
        assert store.halted("s") is None and store.resume("s") is None
    finally:
        store.close()
