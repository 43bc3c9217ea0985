"""The pure backpressure rule: Retry-After parsing, the ladder, the budget, abortable waits."""

from __future__ import annotations

import asyncio
import re
import time
from email.utils import formatdate, parsedate_to_datetime

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypaware.request.backoff import (
    DEFAULT_LADDER,
    MAX_RETRY_AFTER,
    AbortableSleep,
    BackoffPolicy,
    Backpressure,
    BudgetExceededError,
    WaitAbortedError,
    parse_retry_after,
    plan_waits,
    retry_call,
)
from tests.timing import PROMPT

from .helpers import FakeClock

NOW = 1_780_000_000.0


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (None, None),
        ("", None),
        ("   ", None),
        ("0", None),
        ("0.0", None),
        ("-5", None),
        ("soon", None),
        ("1e3", None),
        ("inf", None),
        ("nan", None),
        ("\u0663", None),  # an Arabic-Indic digit is not delta-seconds
        ("12", 12.0),
        (" 12 ", 12.0),
        ("+7", None),  # RFC 9110 delta-seconds has no sign
        ("+1", None),
        ("-0", None),
        ("1.5", 1.5),  # the documented fractional extension
        (".25", None),
        ("1.", None),
        ("1_000", None),
        ("0x10", None),
        ("1 2", None),
        ("9" * 40, MAX_RETRY_AFTER),
        ("9" * 65, None),
        (formatdate(NOW + 90, usegmt=True), 90.0),
        (formatdate(NOW - 90, usegmt=True), None),
        (formatdate(NOW, usegmt=True), None),
        ("Sunday, 06-Nov-94 08:49:37 GMT", None),
        ("Wed, 21 Oct 99999 07:28:00 GMT", None),
        ("Wed, 32 Oct 2026 07:28:00 GMT", None),
    ],
)
def test_parse_retry_after(text: str | None, expected: float | None) -> None:
    assert parse_retry_after(text, now=NOW) == expected


def test_defaults_are_the_spec() -> None:
    policy = BackoffPolicy()
    assert policy.ladder == DEFAULT_LADDER == (30.0, 60.0, 120.0, 300.0)
    assert policy.budget == 300.0
    assert [policy.ladder_step(i) for i in range(6)] == [30, 60, 120, 300, 300, 300]


@pytest.mark.parametrize(
    "kwargs",
    [{"ladder": ()}, {"ladder": (1, 0)}, {"ladder": (-1,)}, {"budget": -1}, {"max_attempts": 0}],
)
def test_policy_rejects_nonsense(kwargs: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        BackoffPolicy(**kwargs)  # type: ignore[arg-type]


def test_default_budget_gives_up_before_the_300s_step() -> None:
    plan = plan_waits(BackoffPolicy(), [None] * 10, clock=lambda: NOW)
    assert plan == type(plan)((30.0, 60.0, 120.0), True)


@given(st.lists(st.one_of(st.none(), st.sampled_from(["0", "-1", "x", "", "2.5", "40"]))))
def test_plan_matches_the_tenacity_loop(answers: list[str | None]) -> None:
    """`retry_call` (tenacity) waits exactly what the pure `plan_waits` says."""
    policy = BackoffPolicy()
    plan = plan_waits(policy, answers, clock=lambda: NOW)
    clock = FakeClock(NOW)
    calls = iter(answers)

    async def attempt() -> str:
        try:
            answer = next(calls)
        except StopIteration:
            return "done"
        raise Backpressure("429", retry_after=answer)

    async def run() -> str | BudgetExceededError:
        try:
            return await retry_call(attempt, policy, sleep=clock.sleep, clock=lambda: NOW)
        except BudgetExceededError as exc:
            return exc

    outcome = asyncio.run(run())
    assert tuple(clock.sleeps) == plan.waits
    assert isinstance(outcome, BudgetExceededError) == plan.gave_up
    if isinstance(outcome, BudgetExceededError):
        assert isinstance(outcome.__cause__, Backpressure)
        assert outcome.waited + outcome.next_wait > policy.budget


async def test_other_exceptions_are_not_retried() -> None:
    clock = FakeClock()

    async def attempt() -> None:
        raise KeyError("boom")

    with pytest.raises(KeyError):
        await retry_call(attempt, BackoffPolicy(), sleep=clock.sleep)
    assert clock.sleeps == []


async def test_max_attempts_bounds_tiny_waits() -> None:
    clock = FakeClock()
    n = 0

    async def attempt() -> None:
        nonlocal n
        n += 1
        raise Backpressure("429", retry_after="0.001")

    with pytest.raises(BudgetExceededError):
        await retry_call(attempt, BackoffPolicy(max_attempts=5), sleep=clock.sleep, clock=clock)
    assert n == 5
    assert clock.sleeps == [0.001] * 4


async def test_abort_wakes_a_parked_sleep_at_once() -> None:
    sleeper = AbortableSleep()
    task = asyncio.ensure_future(sleeper(3600))
    await asyncio.sleep(0.01)
    start = time.monotonic()
    sleeper.abort()
    with pytest.raises(WaitAbortedError):
        await task
    assert time.monotonic() - start < PROMPT
    with pytest.raises(WaitAbortedError):
        await sleeper(1)  # once aborted, never waits again
    assert {t for t in asyncio.all_tasks() if t is not asyncio.current_task()} == set()


async def test_abort_cancels_a_guarded_call() -> None:
    sleeper = AbortableSleep()
    started = asyncio.Event()

    async def slow() -> int:
        started.set()
        await asyncio.sleep(3600)
        return 1

    task = asyncio.ensure_future(sleeper.run(slow()))
    await started.wait()
    sleeper.abort()
    with pytest.raises(WaitAbortedError):
        await task
    assert await AbortableSleep().run(asyncio.sleep(0, result=5)) == 5


async def test_sleep_finishes_normally() -> None:
    clock = FakeClock()
    await AbortableSleep(clock.sleep)(2.0)
    assert clock.sleeps == [2.0]


_GRAMMAR = re.compile(r"[0-9]+(\.[0-9]+)?")


@given(st.text(max_size=20))
def test_only_digits_or_an_http_date_pace_a_retry(text: str) -> None:
    """RFC 9110: delta-seconds is 1*DIGIT (plus the documented fraction); else an HTTP-date."""
    result = parse_retry_after(text, now=NOW)
    if result is None:
        return
    stripped = text.strip()
    if _GRAMMAR.fullmatch(stripped):
        assert result == min(float(stripped), MAX_RETRY_AFTER)
    else:
        assert parsedate_to_datetime(stripped) is not None


@given(st.integers(1, 10**9), st.sampled_from(["+", "-", " +", "0x", "."]))
def test_a_signed_or_prefixed_number_is_garbage(n: int, prefix: str) -> None:
    assert parse_retry_after(f"{prefix}{n}", now=NOW) is None
