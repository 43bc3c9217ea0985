"""close(): prompt, never wedged, nothing left running."""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

from hypaware.core.types import ExportBatch, ExportOptions, ExportResult
from hypaware.export.driver import ExportDriver
from tests.driver.helpers import ScriptedSink, make_cache, spec
from tests.timing import PROMPT


class StubbornSink(ScriptedSink):
    """Parks in a wait that even close() does not end; only cancellation does."""

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        self.batches.append(batch)
        self.entered.set()
        await asyncio.sleep(3600)
        raise AssertionError("unreachable")


def _others() -> set[asyncio.Task[object]]:
    return {t for t in asyncio.all_tasks() if t is not asyncio.current_task()}


async def _close_while_blocked(tmp_path: Path, blocked: ScriptedSink, budget: float) -> None:
    cache = make_cache(tmp_path / "cache", count=9)
    threads = set(threading.enumerate())
    tasks = _others()
    good = ScriptedSink()
    driver = ExportDriver(
        cache,
        [(spec("blocked", export_timeout=budget), blocked), (spec("good"), good)],
        state=tmp_path / "state",
    )
    run = asyncio.ensure_future(driver.run_once(backfill=True))
    # close() comes once the blocked sink is waiting and the good one has delivered.
    await asyncio.wait_for(blocked.entered.wait(), PROMPT)
    await asyncio.wait_for(good.returned.wait(), PROMPT)
    started = time.monotonic()
    await driver.close()
    assert time.monotonic() - started < PROMPT
    report = await asyncio.wait_for(run, PROMPT)
    assert report.sinks["good"].ok
    assert not report.sinks["blocked"].ok
    assert blocked.closed
    assert _others() == tasks
    assert set(threading.enumerate()) == threads
    # The interrupted batch stays recorded, to be re-sent with the same id.
    from hypaware.export.state import ProgressStore

    store = ProgressStore(tmp_path / "state")
    in_flight = store.in_flight("blocked")
    store.close()
    if isinstance(blocked, StubbornSink):
        assert [b.batch_id for b in in_flight] == [blocked.batches[0].batch_id]


async def test_close_aborts_a_sink_parked_in_a_long_wait(tmp_path: Path) -> None:
    sink = ScriptedSink()
    sink.mode = "hang"
    await _close_while_blocked(tmp_path, sink, budget=3600)


async def test_close_cancels_a_sink_that_ignores_close(tmp_path: Path) -> None:
    await _close_while_blocked(tmp_path, StubbornSink(), budget=3600)


async def test_close_stops_run_forever_promptly(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=3)
    tasks = _others()
    driver = ExportDriver(
        cache, [(spec("a", schedule="0 0 1 1 *"), ScriptedSink())], state=tmp_path / "s"
    )
    run = asyncio.ensure_future(driver.run_forever())
    await asyncio.sleep(0.05)
    started = time.monotonic()
    await driver.close()
    await asyncio.wait_for(run, PROMPT)
    assert time.monotonic() - started < PROMPT
    assert _others() == tasks


async def test_close_does_not_wait_for_a_sink_whose_close_hangs(tmp_path: Path) -> None:
    class SlowToClose(ScriptedSink):
        async def close(self) -> None:
            await asyncio.sleep(3600)

    cache = make_cache(tmp_path / "cache", count=3)
    tasks = _others()
    sink = SlowToClose()
    driver = ExportDriver(cache, [(spec("a"), sink)], state=tmp_path / "state")
    await driver.run_once(backfill=True)
    started = time.monotonic()
    await driver.close()
    assert time.monotonic() - started < PROMPT
    assert _others() == tasks
