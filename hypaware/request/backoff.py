"""The backpressure rule: how long to wait before retrying, and when to stop waiting.

One rule for every loop that talks to a rate-limited server (request sinks,
a config pull loop):

- A positive ``Retry-After`` is honoured exactly: delta-seconds as RFC 9110
  writes them (ASCII digits only, no sign), the documented extension of a
  decimal fraction (``1.5``), or an HTTP-date in the future.
- An absent, empty, garbage, zero or negative value, or a date in the past,
  carries no pacing: the wait comes from the ladder instead (30, 60, 120,
  300 s, then 300 s for ever), one step per fallback wait. Every wait is
  therefore > 0 and the loop cannot spin.
- Waits for one unit of work (a chunk) add up against an inline budget
  (default 300 s). A wait that would take the total past the budget is not
  started: the loop gives up with `BudgetExceededError` and the caller
  hands the work back for a later try. `max_attempts` (default 100) bounds
  a server that keeps asking for tiny waits.
- A unit of work may also have a deadline (a request sink's
  `request_deadline`): a wait that would end past it is not started either,
  and `BudgetExceededError` says the deadline, not the budget, stopped it.
- Waits are abortable: `AbortableSleep.abort()` wakes a parked wait at once
  and it raises `WaitAbortedError`.

The rule is pure (`parse_retry_after`, `Pacer`, `plan_waits`); `retry_call`
runs it with tenacity, using `LadderWait` and `BudgetStop` strategies and an
injectable sleep and clock, so tests run on a fake clock in milliseconds.
Nothing here knows HTTP beyond the header's text.
"""

from __future__ import annotations

import asyncio
import math
import re
import time
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC
from email.utils import parsedate_to_datetime
from typing import TypeVar

import attrs
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception_type
from tenacity.stop import stop_base
from tenacity.wait import wait_base

from hypaware.core.errors import HypawareError

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_LADDER",
    "DEFAULT_MAX_ATTEMPTS",
    "MAX_RETRY_AFTER",
    "AbortableSleep",
    "BackoffPolicy",
    "Backpressure",
    "BudgetExceededError",
    "BudgetStop",
    "DeadlineExceededError",
    "LadderWait",
    "Pacer",
    "WaitAbortedError",
    "WaitPlan",
    "parse_retry_after",
    "plan_waits",
    "retry_call",
]

T = TypeVar("T")

DEFAULT_LADDER: tuple[float, ...] = (30.0, 60.0, 120.0, 300.0)
DEFAULT_BUDGET = 300.0
DEFAULT_MAX_ATTEMPTS = 100
MAX_RETRY_AFTER = 366 * 24 * 3600.0
"""Longer Retry-After values are read as this (a year); they exceed any budget anyway."""

# RFC 9110 delta-seconds is 1*DIGIT; the one extension (documented in
# docs/request-sinks.md) is a decimal fraction with digits on both sides.
# Signs, exponents, a bare "." and non-ASCII digits are garbage.
_DELTA = re.compile(r"^[0-9]+(?:\.[0-9]+)?$", re.ASCII)

Sleep = Callable[[float], Awaitable[None]]
Clock = Callable[[], float]


def parse_retry_after(value: str | None, *, now: float) -> float | None:
    """Seconds a ``Retry-After`` value asks to wait, or None when it carries no pacing.

    `value` is the header's text: delta-seconds (``"120"``; the fractional
    ``"1.5"`` is a documented extension; ``"+1"``, ``".5"`` and ``"1e3"``
    are garbage) or an HTTP-date (``"Wed, 21 Oct 2026 07:28:00 GMT"``). `now` is the current
    time in seconds since the epoch. None for absent, empty, garbage (text
    over 64 characters included), zero, negative and past values; a positive
    result is capped at `MAX_RETRY_AFTER`.
    """
    if value is None:
        return None
    text = value.strip()
    if not text or len(text) > 64:
        return None
    if _DELTA.match(text):
        seconds = float(text)
    else:
        try:
            when = parsedate_to_datetime(text)
        except (TypeError, ValueError, IndexError, OverflowError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=UTC)
        try:
            seconds = when.timestamp() - now
        except (OverflowError, OSError, ValueError):
            return None
    if not math.isfinite(seconds) or seconds <= 0:
        return None if seconds <= 0 or math.isnan(seconds) else MAX_RETRY_AFTER
    return min(seconds, MAX_RETRY_AFTER)


def _ladder(value: Iterable[float]) -> tuple[float, ...]:
    return tuple(float(v) for v in value)


@attrs.frozen
class BackoffPolicy:
    """The rule's settings; the defaults are the spec's.

    - `ladder` (seconds, default ``(30, 60, 120, 300)``): fallback waits in
      order; the last repeats. Each must be > 0.
    - `budget` (seconds, default 300): the most one unit of work waits inline.
    - `max_attempts` (default 100, None for no limit): attempts per unit of work.
    """

    ladder: tuple[float, ...] = attrs.field(default=DEFAULT_LADDER, converter=_ladder)
    budget: float = attrs.field(default=DEFAULT_BUDGET, converter=float)
    max_attempts: int | None = attrs.field(default=DEFAULT_MAX_ATTEMPTS)

    @ladder.validator
    def _check_ladder(self, _a: attrs.Attribute[tuple[float, ...]], v: tuple[float, ...]) -> None:
        if not v:
            raise ValueError("ladder must have at least one step")
        if any(not math.isfinite(step) or step <= 0 for step in v):
            raise ValueError(f"every ladder step must be a positive number of seconds, got {v}")

    @budget.validator
    def _check_budget(self, _a: attrs.Attribute[float], v: float) -> None:
        if not math.isfinite(v) or v < 0:
            raise ValueError(f"budget must be a non-negative number of seconds, got {v}")

    @max_attempts.validator
    def _check_attempts(self, _a: attrs.Attribute[int | None], v: int | None) -> None:
        if v is not None and v < 1:
            raise ValueError(f"max_attempts must be at least 1, got {v}")

    def ladder_step(self, index: int) -> float:
        """The `index`-th fallback wait (0-based); past the end, the last step."""
        return self.ladder[min(index, len(self.ladder) - 1)]

    def scaled(self, factor: float) -> BackoffPolicy:
        """The same rule with ladder and budget multiplied by `factor` (for tests and demos)."""
        return attrs.evolve(
            self, ladder=tuple(s * factor for s in self.ladder), budget=self.budget * factor
        )


class Backpressure(Exception):
    """Raised by an attempt to ask for a retry after a wait.

    `retry_after` is the raw ``Retry-After`` text when the server sent one
    and it may pace the retry (None otherwise: the ladder decides).
    `reason` says what happened, for messages; it must hold no secret.
    `cause` is a short label for metrics (``http 503``, ``timeout``,
    ``connection``): one of a few values, never free text.
    """

    def __init__(
        self, reason: str, *, retry_after: str | None = None, cause: str = "backpressure"
    ) -> None:
        super().__init__(reason)
        self.reason = reason
        self.retry_after = retry_after
        self.cause = cause


class BudgetExceededError(HypawareError):
    """A unit of work used up its inline wait budget (or attempts); try it again later."""

    def __init__(
        self,
        reason: str,
        *,
        waited: float,
        next_wait: float,
        attempts: int,
        limit: str = "the inline budget",
    ) -> None:
        super().__init__(
            f"{reason}; gave up after {attempts} attempt(s) and {waited:g}s of waiting "
            f"(the next wait of {next_wait:g}s would pass {limit})"
        )
        self.reason = reason
        self.waited = waited
        self.next_wait = next_wait
        self.attempts = attempts


class DeadlineExceededError(HypawareError):
    """A unit of work ran past its deadline (requests and waits together); try it again later."""


class WaitAbortedError(HypawareError):
    """A wait was cut short because its owner is closing."""


class Pacer:
    """The wait sequence of one unit of work: honour Retry-After, else climb the ladder."""

    __slots__ = ("_clock", "_policy", "_step", "_time_left", "past_deadline", "waited")

    def __init__(
        self,
        policy: BackoffPolicy,
        clock: Clock = time.time,
        time_left: Clock | None = None,
    ) -> None:
        self._policy = policy
        self._clock = clock
        self._time_left = time_left
        self._step = 0
        self.waited = 0.0
        self.past_deadline = False

    def next_wait(self, retry_after: str | None) -> float:
        """The wait before the next attempt; advances the ladder when it falls back to it."""
        honoured = parse_retry_after(retry_after, now=self._clock())
        if honoured is not None:
            return honoured
        wait = self._policy.ladder_step(self._step)
        self._step += 1
        return wait

    def fits(self, wait: float, attempts: int) -> bool:
        """Whether `wait` may start after `attempts` attempts: inside the budget and attempt cap."""
        cap = self._policy.max_attempts
        if cap is not None and attempts >= cap:
            return False
        if self.waited + wait > self._policy.budget:
            return False
        if self._time_left is not None and wait >= self._time_left():
            self.past_deadline = True
            return False
        return True


@attrs.frozen
class WaitPlan:
    """What the rule does with a sequence of retry answers: the waits, and whether it gave up."""

    waits: tuple[float, ...]
    gave_up: bool


def plan_waits(
    policy: BackoffPolicy, retry_afters: Iterable[str | None], *, clock: Clock = time.time
) -> WaitPlan:
    """Replay the rule for attempts answered in turn with `retry_afters` (one per failed attempt).

    Stops at the first wait that does not fit (``gave_up=True``) or when the
    answers run out (the next attempt would then be made).
    """
    pacer = Pacer(policy, clock)
    waits: list[float] = []
    for attempts, answer in enumerate(retry_afters, start=1):
        wait = pacer.next_wait(answer)
        if not pacer.fits(wait, attempts):
            return WaitPlan(tuple(waits), True)
        pacer.waited += wait
        waits.append(wait)
    return WaitPlan(tuple(waits), False)


class LadderWait(wait_base):
    """tenacity wait strategy: the `Pacer`'s next wait for the last `Backpressure`."""

    def __init__(self, pacer: Pacer) -> None:
        self.pacer = pacer

    def __call__(self, retry_state: RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        retry_after = exc.retry_after if isinstance(exc, Backpressure) else None
        return self.pacer.next_wait(retry_after)


class BudgetStop(stop_base):
    """tenacity stop strategy: stop when the upcoming wait would not fit the `Pacer`'s budget.

    tenacity computes the wait before asking whether to stop, so the
    upcoming wait is known here; a wait that fits is added to the total.
    """

    def __init__(self, pacer: Pacer) -> None:
        self.pacer = pacer

    def __call__(self, retry_state: RetryCallState) -> bool:
        wait = retry_state.upcoming_sleep
        if not self.pacer.fits(wait, retry_state.attempt_number):
            return True
        self.pacer.waited += wait
        return False


class AbortableSleep:
    """An async sleep that `abort()` wakes at once, raising `WaitAbortedError`.

    `sleep` is the underlying sleep (``asyncio.sleep`` by default; tests
    inject a fake-clock one). Once aborted, every later call raises at once.
    """

    def __init__(self, sleep: Sleep = asyncio.sleep) -> None:
        self._sleep = sleep
        self._event = asyncio.Event()

    @property
    def aborted(self) -> bool:
        return self._event.is_set()

    def abort(self) -> None:
        self._event.set()

    async def __call__(self, seconds: float) -> None:
        if self._event.is_set():
            raise WaitAbortedError("the wait was aborted: closing")
        sleeper = asyncio.ensure_future(self._sleep(seconds))
        waker = asyncio.ensure_future(self._event.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (sleeper, waker):
                task.cancel()
            # Reap both so no task outlives the wait, even when we were cancelled.
            await asyncio.gather(sleeper, waker, return_exceptions=True)
        if self._event.is_set():
            raise WaitAbortedError("the wait was aborted: closing")
        sleeper.result()

    async def run(self, awaitable: Awaitable[T]) -> T:
        """Await `awaitable`; if `abort()` comes first, cancel it and raise `WaitAbortedError`."""
        if self._event.is_set():
            raise WaitAbortedError("aborted: closing")
        task = asyncio.ensure_future(awaitable)
        waker = asyncio.ensure_future(self._event.wait())
        try:
            await asyncio.wait({task, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not task.done():
                task.cancel()
            waker.cancel()
            await asyncio.gather(task, waker, return_exceptions=True)
        if task.cancelled():
            raise WaitAbortedError("aborted: closing")
        return task.result()


def _give_up(retry_state: RetryCallState) -> None:
    outcome = retry_state.outcome
    exc = outcome.exception() if outcome else None
    reason = exc.reason if isinstance(exc, Backpressure) else "retries failed"
    stop = retry_state.retry_object.stop
    pacer = stop.pacer if isinstance(stop, BudgetStop) else None
    waited = pacer.waited if pacer is not None else retry_state.idle_for
    late = pacer is not None and pacer.past_deadline
    raise BudgetExceededError(
        reason,
        waited=waited,
        next_wait=retry_state.upcoming_sleep,
        attempts=retry_state.attempt_number,
        limit="the request deadline" if late else "the inline budget",
    ) from exc


async def retry_call(
    attempt: Callable[[], Awaitable[T]],
    policy: BackoffPolicy,
    *,
    sleep: Sleep = asyncio.sleep,
    clock: Clock = time.time,
    on_wait: Callable[[Backpressure, float, int], None] | None = None,
    time_left: Clock | None = None,
) -> T:
    """Run `attempt` until it returns, retrying each `Backpressure` it raises per the rule.

    Raises `BudgetExceededError` (from the last `Backpressure`) when the
    next wait would pass the budget, `WaitAbortedError` if `sleep` is an
    aborted `AbortableSleep`, and any other exception of `attempt` at once.
    `on_wait(backpressure, seconds, attempt_number)` is called before each wait.
    `time_left()`, when given, is the seconds left before a deadline: a wait
    that would not end before it is not started (`BudgetExceededError`).
    """
    pacer = Pacer(policy, clock, time_left)

    def before_sleep(retry_state: RetryCallState) -> None:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        if on_wait is not None and isinstance(exc, Backpressure):
            on_wait(exc, retry_state.upcoming_sleep, retry_state.attempt_number)

    retrying = AsyncRetrying(
        sleep=sleep,
        wait=LadderWait(pacer),
        stop=BudgetStop(pacer),
        retry=retry_if_exception_type(Backpressure),
        retry_error_callback=_give_up,
        before_sleep=before_sleep,
    )
    result: T = await retrying(attempt)
    return result
