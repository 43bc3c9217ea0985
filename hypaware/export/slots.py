"""When a sink's pass fires: the clock, the next slot of a schedule, and waiting for it."""

from __future__ import annotations

import asyncio
import contextlib
from datetime import UTC, datetime
from typing import Protocol

from hypaware.core.schedule import next_fire

__all__ = ["Clock", "SystemClock", "next_slot", "sleep_until"]


class Clock(Protocol):
    """Where the driver gets the time and how it waits (UTC). Inject one in tests."""

    def now(self) -> datetime: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The wall clock and `asyncio.sleep`."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


def next_slot(schedule: str, now: datetime, last: datetime | None) -> datetime:
    """The next slot of `schedule` to fire: strictly after `now` and after `last`.

    Taking the later of the two means a slot never fires twice, even when
    the clock steps back, and slots missed while a pass ran long are
    skipped rather than fired in a burst.
    """
    after = now if last is None or now > last else last
    return next_fire(schedule, after)


async def sleep_until(clock: Clock, stopped: asyncio.Event, when: datetime) -> bool:
    """Wait until `when` by the clock; False if the driver stops (`stopped` is set) first."""
    stop = asyncio.ensure_future(stopped.wait())
    try:
        while True:
            delay = (when - clock.now()).total_seconds()
            if delay <= 0:
                return not stopped.is_set()
            # Wake up at least every minute so a wall-clock jump is noticed.
            nap = asyncio.ensure_future(clock.sleep(min(delay, 60.0)))
            try:
                await asyncio.wait({nap, stop}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                if not nap.done():
                    nap.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await nap
            if stopped.is_set():
                return False
    finally:
        stop.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await stop
