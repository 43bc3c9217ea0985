"""Property: for any run of backpressure answers, the sink waits exactly as the spec says.

Drives a real `RequestSink` through a scripted transport and a fake clock:
every wait is > 0, a positive Retry-After is honoured exactly, the other
waits follow the ladder 30, 60, 120, 300, 300, ..., the waits of one chunk
never add up past the budget or the request deadline, and past them the partition comes back for
retry (never dropped). Every re-send is byte-identical with the same id.
"""

from __future__ import annotations

import asyncio
import math
import string
from email.utils import formatdate

import httpx
from hypothesis import given
from hypothesis import strategies as st

from hypaware.core.types import ExportOptions
from hypaware.request.backoff import MAX_RETRY_AFTER, BackoffPolicy
from hypaware.request.central import CentralWire
from hypaware.request.sink import RequestSink, Timeouts

from .helpers import FakeClock, ScriptedTransport, make_export, make_partition

NOW = 1_780_000_000.0  # whole seconds, so HTTP-dates (1 s resolution) are exact
LADDER = (30.0, 60.0, 120.0, 300.0)

# Each answer: (status or "conn"/"timeout", Retry-After spec). A spec is ("text", text,
# asked wait or None) or ("date", offset): an HTTP-date `offset` seconds after the
# moment of the answer (the fake clock moves with every wait).
garbage = st.text(alphabet=string.ascii_letters + " ,;:-_/!?", max_size=30).map(
    lambda t: ("text", t, None)
)
honoured = st.one_of(
    st.integers(1, 10**6).map(lambda n: ("text", str(n), float(n))),
    st.decimals(min_value="0.001", max_value="500", places=3).map(
        lambda d: ("text", str(d), float(str(d)))
    ),
    st.integers(1, 10**5).map(lambda s: ("date", s)),
    st.integers(21, 60).map(lambda k: ("text", "9" * k, MAX_RETRY_AFTER)),
)
no_pacing = st.one_of(
    st.just(("text", None, None)),
    st.sampled_from(["", " ", "0", "00", "0.0", "-0"]).map(lambda t: ("text", t, None)),
    st.integers(1, 10**6).map(lambda n: ("text", f"-{n}", None)),
    st.integers(-(10**6), 0).map(lambda s: ("date", s)),
    garbage,
)
statuses = st.sampled_from([429, 503, 500, 502, 504, "conn", "timeout"])
answers = st.lists(st.tuples(statuses, st.one_of(honoured, no_pacing)), max_size=25)


def _header(spec: tuple, now: float) -> str | None:
    if spec[0] == "date":
        return formatdate(now + spec[1], usegmt=True)
    return spec[1]


def _asked(status: int | str, spec: tuple, now: float) -> float | None:
    """The wait the answer asks for, computed independently of the code under test."""
    if status not in (429, 503):
        return None  # only backpressure statuses are paced by Retry-After
    if spec[0] == "date":
        wait = math.floor(now + spec[1]) - now  # HTTP-dates have whole seconds
        return wait if wait > 0 else None
    return spec[2]


def _responder(status: int | str, spec: tuple, clock: FakeClock):
    def respond(request: httpx.Request) -> object:
        if status == "conn":
            return httpx.ConnectError("connection refused")
        if status == "timeout":
            return httpx.ReadTimeout("read timed out")
        text = _header(spec, clock.now)
        headers = {} if text is None else {"Retry-After": text}
        return httpx.Response(int(status), headers=headers, json={"error": {"message": "later"}})

    return respond


def _expected(script: list[tuple], budget: float, deadline: float) -> tuple[list[float], bool]:
    """The waits the spec asks for, and whether the chunk gives up.

    Answers take no time on the fake clock, so the chunk's age is the sum of
    its waits; a wait that would not end before the deadline is not started.
    """
    waits: list[float] = []
    step = 0
    now = NOW
    for status, spec in script:
        wait = _asked(status, spec, now)
        if wait is None:
            wait = LADDER[min(step, len(LADDER) - 1)]
            step += 1
        if sum(waits) + wait > budget or sum(waits) + wait >= deadline:
            return waits, True
        waits.append(wait)
        now += wait
    return waits, False


@given(
    answers,
    st.sampled_from([300.0, 0.0, 45.0, 1000.0]),
    st.sampled_from([360.0, 100.0, 1e12]),
)
def test_ladder_and_budget_for_any_answers(script, budget, deadline) -> None:
    clock = FakeClock(NOW)
    transport = ScriptedTransport([_responder(s, spec, clock) for s, spec in script])
    sink = RequestSink(
        "fwd",
        CentralWire("https://central.example", "tok-secret-123", "gw"),
        gateway="gw",
        policy=BackoffPolicy(ladder=LADDER, budget=budget),
        timeouts=Timeouts(deadline=deadline),
        transport=transport,
        sleep=clock.sleep,
        clock=clock,
    )
    part = make_partition("p1", 0, 20)

    async def run():
        try:
            return await sink.export_batch(make_export([part]), ExportOptions())
        finally:
            await sink.close()

    result = asyncio.run(run())
    waits, gave_up = _expected(script, budget, deadline)

    assert all(w > 0 for w in clock.sleeps)
    assert clock.sleeps == waits
    assert sum(clock.sleeps) <= budget
    assert sum(clock.sleeps) < deadline
    if gave_up:
        assert result.exported == ()
        (retry,) = result.retry_partitions
        assert retry.partition_id == "p1" and retry.retryable
        assert "tok-secret-123" not in retry.reason
        assert len(transport.requests) == len(waits) + 1
    else:
        assert result.exported == ("p1",) and result.retry_partitions == ()
        assert len(transport.requests) == len(script) + 1
    # The same chunk every time: byte-identical body, same id.
    assert len(set(transport.bodies)) == 1
    assert len({r.headers["X-Hyp-Batch-Id"] for r in transport.requests}) == 1
    assert transport.closed
