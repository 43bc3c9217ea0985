"""ExportDriver: schedules, independence of sinks, progress, respool, recovery, bad input."""

from __future__ import annotations

import asyncio
import fcntl
import logging
import os
import sqlite3
import time
from datetime import timedelta
from pathlib import Path

import pytest

from hypaware.cache.local import LocalCache
from hypaware.core.config_loader import load_config
from hypaware.core.errors import ConfigError
from hypaware.core.manifest import PluginManifest
from hypaware.core.registry import Registry
from hypaware.core.types import ExportResult, PartitionRef
from hypaware.export.driver import ExportDriver
from hypaware.export.observer import CountingObserver, NullObserver
from hypaware.export.runner import group_batches
from hypaware.export.state import STATE_FILE, ProgressStore
from tests.driver import plugins
from tests.driver.helpers import (
    T0,
    ManualClock,
    ScriptedSink,
    all_row_ids,
    events_info,
    make_cache,
    rows,
    sinks,
    spec,
)
from tests.timing import PROMPT


def _driver(tmp_path: Path, cache: LocalCache, pairs: list, **kwargs: object) -> ExportDriver:
    kwargs.setdefault("state", tmp_path / "state")
    return ExportDriver(cache, pairs, **kwargs)  # type: ignore[arg-type]


def _add(cache: LocalCache, start: int, count: int) -> None:
    cache.append("events", rows(start, count))
    cache.seal()


async def test_two_sinks_on_different_schedules_export_independently(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=12)
    fast, hourly = ScriptedSink(), ScriptedSink()
    clock = ManualClock(T0 + timedelta(minutes=1))
    driver = ExportDriver(
        cache,
        [
            (spec("fast", schedule="*/5 * * * *"), fast),
            (spec("hourly", schedule="0 * * * *"), hourly),
        ],
        state=tmp_path / "state",
        clock=clock,
    )
    task = asyncio.ensure_future(driver.run_forever(backfill=True))
    await clock.advance(timedelta(0), sleepers=2)
    await clock.advance(timedelta(minutes=4), sleepers=2)  # 00:05: only "fast" fires
    assert set(fast.rows) == all_row_ids(cache)
    assert hourly.batches == []
    _add(cache, 100, 6)
    await clock.advance(timedelta(minutes=5), sleepers=2)  # 00:10
    assert set(fast.rows) == all_row_ids(cache)
    assert hourly.batches == []
    await clock.advance(timedelta(minutes=50), sleepers=2)  # 01:00: both fire
    assert set(hourly.rows) == all_row_ids(cache)
    for sink in (fast, hourly):
        assert all(n == 1 for n in sink.acks.values())
        assert all(n == 1 for n in sink.rows.values())
    # The clock jumped 50 minutes: "fast" fired the first slot it was due for (00:15) and
    # skipped the rest rather than firing them in a burst.
    state = ProgressStore(tmp_path / "state")
    assert state.last_slot("fast") == T0 + timedelta(minutes=15)
    assert state.last_slot("hourly") == T0 + timedelta(hours=1)
    state.close()
    await driver.close()
    await asyncio.wait_for(task, PROMPT)


async def test_a_slot_never_fires_twice_across_restarts(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=3)
    for _ in range(2):
        sink = ScriptedSink()
        clock = ManualClock(T0 + timedelta(minutes=4, seconds=30))
        driver = _driver(tmp_path, cache, sinks(("a", sink)), clock=clock)
        task = asyncio.ensure_future(driver.run_forever(backfill=True))
        await clock.advance(timedelta(0), sleepers=1)
        await clock.advance(timedelta(seconds=30), sleepers=1)  # 00:05
        passes = len(sink.batches)
        await driver.close()
        await asyncio.wait_for(task, PROMPT)
    # The second run started before 00:05 again, but 00:05 had fired: it waited for 00:10.
    assert passes == 0


async def test_failing_sink_delays_nobody_and_keeps_its_backlog(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=30)
    good, bad, hung = ScriptedSink(), ScriptedSink(), ScriptedSink()
    bad.mode = "raise"
    hung.mode = "hang"
    # The hung sink's timeout is the test's only wait; it is long next to what
    # the good sink needs (milliseconds), so a busy machine still tells them apart.
    hang = 2.0
    driver = ExportDriver(
        cache,
        [(spec("good"), good), (spec("bad"), bad), (spec("hung", export_timeout=hang), hung)],
        state=tmp_path / "state",
    )
    started = time.monotonic()
    report = await driver.run_once(backfill=True)
    assert time.monotonic() - started < PROMPT
    assert report.sinks["good"].ok
    assert report.sinks["good"].seconds < hang  # it did not wait for the hung sink
    assert len(hung.batches) == 1
    assert set(good.rows) == all_row_ids(cache)
    assert "destination exploded" in report.sinks["bad"].errors[0]
    assert "timed out" in report.sinks["hung"].errors[0]
    n_parts = len(cache.ready_partitions("events"))
    for name in ("bad", "hung"):
        assert report.sinks[name].retried == n_parts
        assert report.sinks[name].lag_partitions == n_parts
    state = driver.state
    assert len(state.respooled("bad")) == n_parts
    assert state.sink_state("bad").last_error is not None
    await driver.close()


async def test_recovering_sink_catches_up_with_nothing_lost(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=10)
    sink = ScriptedSink()
    sink.mode = "fail"
    for i in range(3):
        driver = _driver(tmp_path, cache, sinks(("flaky", sink), max_batch_rows=4))
        report = await driver.run_once(backfill=True)
        assert report.sinks["flaky"].partitions == 0
        await driver.close()
        _add(cache, 100 + 10 * i, 10)
    sink.mode = "partial"
    sink.fail_ids = lambda pid: int(pid[:12]) % 3 == 0
    driver = _driver(tmp_path, cache, sinks(("flaky", sink), max_batch_rows=4))
    await driver.run_once()
    sink.mode = "ok"
    report = await driver.run_once()
    assert report.sinks["flaky"].lag_partitions == 0
    assert set(sink.rows) == all_row_ids(cache)
    assert all(n == 1 for n in sink.acks.values())
    assert all(n == 1 for n in sink.rows.values())
    assert driver.state.respooled("flaky") == []
    # Respooled partitions went first on the catch-up passes.
    await driver.close()


async def test_new_sink_starts_at_first_sight_unless_backfill(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=9)
    old_ids = all_row_ids(cache)
    fresh, back = ScriptedSink(), ScriptedSink()
    driver = _driver(tmp_path, cache, sinks(("fresh", fresh)))
    assert (await driver.run_once()).sinks["fresh"].partitions == 0
    await driver.close()
    driver = _driver(tmp_path, cache, sinks(("fresh", fresh), ("back", back)))
    await driver.run_once(sinks=["back"], backfill=True)
    assert set(back.rows) == old_ids
    _add(cache, 500, 3)
    await driver.run_once()
    assert set(fresh.rows) == all_row_ids(cache) - old_ids
    assert set(back.rows) == all_row_ids(cache)
    # A dataset added after both sinks were seen is new to them: all of it is exported.
    cache.define_dataset(events_info("audit"))
    cache.append("audit", rows(0, 3))
    cache.seal("audit")
    await driver.run_once()
    for sink in (fresh, back):
        assert any(p.dataset == "audit" for b in sink.batches for p in b.partitions)
    # The first sink's 9 partitions stay before its start point, counted, until a backfill.
    report = await driver.run_once(sinks=["fresh"])
    before = report.sinks["fresh"].ledger["events"]["before_start"]
    assert before["rows"] == len(old_ids) and before["partitions"] > 0
    report = await driver.run_once(sinks=["fresh"], backfill=True)
    assert report.sinks["fresh"].partitions == before["partitions"]
    assert set(fresh.rows) >= all_row_ids(cache)
    sent = [(p.dataset, p.id) for b in fresh.batches for p in b.partitions]
    assert len(sent) == len(set(sent)), "a partition was sent twice"
    assert report.sinks["fresh"].ledger["events"]["before_start"]["partitions"] == 0
    await driver.close()


async def test_batch_in_flight_at_a_crash_is_resent_with_its_id_and_partitions(
    tmp_path: Path,
) -> None:
    cache = make_cache(tmp_path / "cache", count=30)
    parts = cache.ready_partitions("events")
    store = ProgressStore(tmp_path / "state")
    store.start("a", "events", 0)
    # Recorded before the sink saw it, then the process died: three partitions in one batch.
    chosen = [(p.id, p.seq) for p in parts[:3]]
    store.begin_batch("crashed-batch", "a", "events", chosen)
    store.attempt("crashed-batch")
    store.close()
    sink = ScriptedSink()
    # With one row per batch allowed, a fresh plan would split them; the re-send does not.
    driver = _driver(tmp_path, cache, sinks(("a", sink), max_batch_rows=1))
    await driver.run_once()
    first = sink.batches[0]
    assert first.batch_id == "crashed-batch"
    assert [p.id for p in first.partitions] == [p.id for p in parts[:3]]
    assert sink.attempts[0] == 2
    assert all(len(b.partitions) == 1 for b in sink.batches[1:])
    assert set(sink.rows) == all_row_ids(cache)
    assert all(n == 1 for n in sink.acks.values())
    await driver.close()


async def test_misreporting_sinks_are_reconciled(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=9)

    class Liar(ScriptedSink):
        async def export_batch(self, batch, opts):  # type: ignore[no-untyped-def]
            self.batches.append(batch)
            # Claims a partition it was not given, forgets the last one.
            return ExportResult(exported=[p.id for p in batch.partitions[:-1]] + ["bogus"])

    liar, garbage = Liar(), ScriptedSink()
    garbage.mode = "garbage"
    driver = _driver(tmp_path, cache, sinks(("liar", liar), ("garbage", garbage)))
    report = await driver.run_once(backfill=True)
    assert report.sinks["liar"].retried == 1
    (entry,) = driver.state.respooled("liar")
    assert entry.reason == "the sink did not report this partition"
    assert report.sinks["garbage"].partitions == 0
    assert "not ExportResult" in report.sinks["garbage"].errors[0]
    assert len(driver.state.respooled("garbage")) == len(cache.ready_partitions("events"))
    await driver.close()


async def test_batches_respect_row_and_byte_bounds(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=40)
    sink = ScriptedSink()
    driver = _driver(tmp_path, cache, sinks(("a", sink), max_batch_rows=5))
    await driver.run_once(backfill=True)
    assert len(sink.batches) > 1
    assert all(b.row_count <= 5 for b in sink.batches)
    await driver.close()
    part = PartitionRef(id="x", dataset="d", seq=1, row_count=10, byte_size=100)
    assert group_batches([part, part, part], max_rows=100, max_bytes=150) == [
        [part],
        [part],
        [part],
    ]
    assert group_batches([part, part], max_rows=1, max_bytes=10**9) == [[part], [part]]


async def test_dataset_filter(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=6)
    cache.define_dataset(events_info("audit"))
    cache.append("audit", rows(0, 3))
    cache.seal("audit")
    only_audit = ScriptedSink()
    driver = _driver(tmp_path, cache, sinks(("a", only_audit), datasets=("audit", "later")))
    await driver.run_once(backfill=True)
    assert {p.dataset for b in only_audit.batches for p in b.partitions} == {"audit"}
    await driver.close()


async def test_sink_that_fails_to_build_is_named_and_others_export(tmp_path: Path) -> None:
    registry = Registry(
        [
            PluginManifest(name="@test/ok", kind="sink", factory="tests.driver.plugins:make_ok"),
            PluginManifest(
                name="@test/broken", kind="sink", factory="tests.driver.plugins:make_broken"
            ),
        ]
    )
    make_cache(tmp_path / "cache", count=6)
    config = load_config(
        {
            "cache": {"path": "cache"},
            "state_dir": "state",
            "sinks": {"good": {"plugin": "@test/ok"}, "broken": {"plugin": "@test/broken"}},
        },
        base_dir=str(tmp_path),
    )
    observer = CountingObserver()
    driver = ExportDriver.from_config(config, registry=registry, observer=observer)
    report = await driver.run_once(backfill=True)
    (error,) = report.sinks["broken"].errors
    assert "'broken'" in error and "@test/broken" in error and "license server" in error
    assert report.sinks["good"].ok
    assert report.sinks["good"].rows == 6
    assert plugins.BUILT["good"].rows
    assert observer.counters["broken"].errors == 1
    # The next pass tries to build it again, and still reports it.
    report = await driver.run_once()
    assert report.sinks["broken"].errors
    await driver.close()


async def test_schedule_that_never_fires(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with pytest.raises(ConfigError, match="never fires"):
        load_config({"sinks": {"x": {"plugin": "p", "config": {"schedule": "0 0 30 2 *"}}}})
    cache = make_cache(tmp_path / "cache", count=3)
    good, never = ScriptedSink(), ScriptedSink()
    clock = ManualClock(T0)
    observer = CountingObserver()
    driver = ExportDriver(
        cache,
        [(spec("never", schedule="0 0 30 2 *"), never), (spec("good"), good)],
        state=tmp_path / "state",
        clock=clock,
        observer=observer,
    )
    with caplog.at_level(logging.ERROR):
        task = asyncio.ensure_future(driver.run_forever(backfill=True))
        await clock.advance(timedelta(0), sleepers=1)
        await clock.advance(timedelta(minutes=5), sleepers=1)
    assert "sink 'never': schedule '0 0 30 2 *' gives no next time" in caplog.text
    assert observer.counters["never"].errors == 1
    assert set(good.rows) == all_row_ids(cache)
    await driver.close()
    await asyncio.wait_for(task, PROMPT)


async def test_corrupt_segment_is_skipped_and_the_rest_exported(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=12)
    parts = cache.ready_partitions("events")
    (tmp_path / "cache" / "events" / "sealed" / f"{parts[3].id}.arrow").write_bytes(b"junk")
    fresh_cache = LocalCache(tmp_path / "cache", fsync=False)
    sink = ScriptedSink()
    driver = _driver(tmp_path, fresh_cache, sinks(("a", sink)))
    report = await driver.run_once(backfill=True)
    assert report.sinks["a"].partitions == len(parts) - 1
    assert fresh_cache.stats.corrupt_segments == 1
    await driver.close()


async def test_missing_cache_directory_exports_nothing(tmp_path: Path) -> None:
    sink = ScriptedSink()
    driver = _driver(tmp_path, LocalCache(tmp_path / "nope"), sinks(("a", sink)))
    report = await driver.run_once()
    assert report.sinks["a"].ok and report.sinks["a"].partitions == 0
    await driver.close()


async def test_locked_state_is_reported_and_nothing_is_lost(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=9)
    sink = ScriptedSink()
    driver = _driver(
        tmp_path,
        cache,
        sinks(("a", sink)),
        state=ProgressStore(tmp_path / "state", busy_timeout=0.05),
    )
    blocker = sqlite3.connect(tmp_path / "state" / STATE_FILE, isolation_level=None)
    blocker.execute("BEGIN EXCLUSIVE")
    report = await driver.run_once(backfill=True)
    assert "locked by another process" in report.sinks["a"].errors[0]
    blocker.execute("ROLLBACK")
    blocker.close()
    report = await driver.run_once(backfill=True)
    assert set(sink.rows) == all_row_ids(cache)
    assert all(n == 1 for n in sink.acks.values())
    await driver.close()


async def test_another_process_exporting_the_same_sink(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=3)
    (tmp_path / "state" / "locks").mkdir(parents=True)
    fd = os.open(tmp_path / "state" / "locks" / "a.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(fd, fcntl.LOCK_EX)
    try:
        sink, other = ScriptedSink(), ScriptedSink()
        driver = _driver(tmp_path, cache, sinks(("a", sink), ("b", other)))
        report = await driver.run_once(backfill=True)
        assert report.sinks["a"].errors == ["sink 'a' is being exported by another process"]
        assert report.sinks["b"].ok
        await driver.close()
    finally:
        os.close(fd)


async def test_retention_waits_for_every_sink(tmp_path: Path) -> None:
    clock = ManualClock(T0)
    cache = make_cache(tmp_path / "cache", count=9, retention=timedelta(hours=1), clock=clock.now)
    n = len(cache.ready_partitions("events"))
    a, b = ScriptedSink(), ScriptedSink()
    b.mode = "fail"
    driver = _driver(tmp_path, cache, sinks(("a", a), ("b", b)), clock=clock)
    await driver.run_once(backfill=True)
    clock.t += timedelta(hours=2)
    await driver.run_once()
    assert len(cache.ready_partitions("events")) == n  # b still needs them all
    b.mode = "ok"
    await driver.run_once()
    assert cache.ready_partitions("events") == []
    assert cache.stats.forced_drops == 0
    await driver.close()


async def test_hard_cap_loss_is_reported_once(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=9, retention=None)
    sink = ScriptedSink()
    sink.mode = "fail"
    observer = CountingObserver()
    driver = _driver(tmp_path, cache, sinks(("a", sink)), observer=observer)
    await driver.run_once(backfill=True)
    cache.max_bytes = 1
    await driver.run_once()  # retention after the pass drops everything, forced
    assert cache.stats.forced_drops > 0
    sink.mode = "ok"
    report = await driver.run_once()
    assert report.sinks["a"].lost == cache.stats.forced_drops
    assert observer.counters["a"].lost == cache.stats.forced_drops
    assert driver.state.respooled("a") == []
    await driver.close()


async def test_observer_that_raises_does_not_stop_exports(tmp_path: Path) -> None:
    class Broken(NullObserver):
        def batch_exported(self, *args: object, **kwargs: object) -> None:
            raise ValueError("metrics backend down")

    cache = make_cache(tmp_path / "cache", count=6)
    sink = ScriptedSink()
    driver = _driver(tmp_path, cache, sinks(("a", sink)), observer=Broken())
    report = await driver.run_once(backfill=True)
    assert report.sinks["a"].rows == 6
    await driver.close()


async def test_unknown_sink_name(tmp_path: Path) -> None:
    driver = _driver(tmp_path, make_cache(tmp_path / "cache"), sinks(("alpha", ScriptedSink())))
    with pytest.raises(ConfigError, match=r"no such sink.*did you mean 'alpha'"):
        await driver.run_once(sinks=["alpah"])
    await driver.close()
    await driver.close()


async def test_a_sink_name_given_twice(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=0)
    with pytest.raises(ConfigError, match="sink name given twice"):
        _driver(tmp_path, cache, sinks(("a", ScriptedSink()), ("a", ScriptedSink())))
