"""Every sealed row accounted for: cache identity, start points, backfill, the ledger."""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

import hypaware
from hypaware.cache.identity import IDENTITY_FILE, local_identity
from hypaware.cache.local import LocalCache
from hypaware.cli import main
from hypaware.cli.status import collect_status
from hypaware.core.errors import CacheError
from hypaware.core.types import DatasetInfo, PartitionRef
from hypaware.export.accounts import BUCKETS
from hypaware.export.driver import ExportDriver
from tests.timing import PROMPT

from .helpers import (
    T0,
    ManualClock,
    ScriptedSink,
    all_row_ids,
    make_cache,
    rows,
    sinks,
    spec,
)


def _add(cache: LocalCache, start: int, count: int) -> None:
    cache.append("events", rows(start, count))
    cache.seal()


def _balanced(ledger: dict[str, Any]) -> None:
    for unit in ("partitions", "rows"):
        assert sum(ledger[b][unit] for b in BUCKETS) == ledger["sealed"][unit], ledger


def _parquet_rows(root: Path) -> list[str]:
    out: list[str] = []
    for path in sorted(root.rglob("*.parquet")):
        out += pq.read_table(path).column("row_id").to_pylist()
    return out


def _config(tmp_path: Path, root: str = "out", **sink: Any) -> dict[str, Any]:
    return {
        "state_dir": str(tmp_path / "state"),
        "cache": {"path": str(tmp_path / "cache")},
        "sinks": {
            "files": {
                "writer": "@hypaware/format-parquet",
                "destination": "@hypaware/local-fs",
                "config": {"root": str(tmp_path / root)},
                **sink,
            }
        },
    }


async def _once(doc: dict[str, Any], cache: LocalCache, **kwargs: Any) -> Any:
    driver = ExportDriver.from_config(hypaware.load_config(doc), cache=cache)
    try:
        return await driver.run_once(**kwargs)
    finally:
        await driver.close()


# ------------------------------------------------------------------ identity


def test_a_cache_keeps_one_identity_and_a_new_directory_gets_another(tmp_path: Path) -> None:
    first = LocalCache(tmp_path / "cache", fsync=False)
    identity = first.identity
    assert LocalCache(tmp_path / "cache", fsync=False).identity == identity
    assert (tmp_path / "cache" / IDENTITY_FILE).read_text().splitlines()[0] == identity
    shutil.rmtree(tmp_path / "cache")
    assert LocalCache(tmp_path / "cache", fsync=False).identity != identity


def test_a_copied_cache_says_its_identity_was_made_elsewhere(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    origin = make_cache(tmp_path / "cache", count=3)
    identity = origin.identity
    shutil.copytree(tmp_path / "cache", tmp_path / "copy")
    assert "made for" not in caplog.text
    copy = LocalCache(tmp_path / "copy", fsync=False)
    assert copy.identity == identity  # a copy is its origin, to every sink...
    # ...so it says so, naming the file to delete.
    assert f"carries the identity {identity} made for" in caplog.text
    assert str(tmp_path / "copy" / IDENTITY_FILE) in caplog.text
    (tmp_path / "copy" / IDENTITY_FILE).unlink()
    assert LocalCache(tmp_path / "copy", fsync=False).identity != identity


def test_a_malformed_identity_file_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / IDENTITY_FILE).write_text("no spaces allowed here\n")
    with pytest.raises(CacheError, match="cache-id") as info:
        local_identity(tmp_path / "cache")
    assert "not a usable cache identity" in str(info.value)


def test_two_caches_making_their_identity_at_once_agree(tmp_path: Path) -> None:
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        made = set(pool.map(lambda _: local_identity(tmp_path / "c", fsync=False), range(32)))
    assert len(made) == 1
    assert [p.name for p in (tmp_path / "c").iterdir()] == [IDENTITY_FILE]


async def test_a_host_cache_without_identity_gets_a_visible_standin(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    inner = make_cache(tmp_path / "cache", count=6)

    class Anonymous:
        """A host's cache: the three reads, no identity."""

        def datasets(self) -> list[DatasetInfo]:
            return inner.datasets()

        def ready_partitions(self, dataset: str, *, after: int = 0) -> list[PartitionRef]:
            return inner.ready_partitions(dataset, after=after)

        def partition(self, dataset: str, pid: str) -> PartitionRef | None:
            return inner.partition(dataset, pid)

    sink = ScriptedSink()
    for _ in range(2):
        driver = ExportDriver(Anonymous(), sinks(("a", sink)), state=tmp_path / "state")  # type: ignore[arg-type]
        report = await driver.run_once(backfill=True)
        await driver.close()
        (notice,) = report.sinks["a"].notices
        assert "no identity of its own" in notice
    assert "has no identity" in caplog.text
    standins = {b.cache_identity for b in sink.batches}
    assert len(standins) == 1 and "" not in standins  # one stand-in, kept across drivers


async def test_a_bad_identity_from_a_host_cache_fails_the_run_naming_it(tmp_path: Path) -> None:
    inner = make_cache(tmp_path / "cache", count=3)

    class Odd:
        identity = "bad id!"

        def __getattr__(self, name: str) -> Any:
            return getattr(inner, name)

    driver = ExportDriver(Odd(), sinks(("a", ScriptedSink())), state=tmp_path / "state")  # type: ignore[arg-type]
    report = await driver.run_once()
    await driver.close()
    assert not report.ok
    assert "'bad id!' is not a usable cache identity" in report.sinks["a"].errors[0]


# ------------------------------------------------------------------ a replaced cache


async def test_a_fresh_cache_behind_an_old_state_dir_is_exported_from_its_beginning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    doc = _config(tmp_path)
    cache = make_cache(tmp_path / "cache", count=60)
    assert (await _once(doc, cache, backfill=True)).ok
    old_rows = len(_parquet_rows(tmp_path / "out"))
    assert old_rows == 60
    # The disk is replaced: a new, empty cache directory; its seqs start at 1 again.
    shutil.rmtree(tmp_path / "cache")
    fresh = make_cache(tmp_path / "cache", count=0)
    _add(fresh, 1000, 45)
    status = collect_status(hypaware.load_config(doc))
    assert status["warnings"] and "not the one the progress store tracks" in status["warnings"][0]
    # Before the next export, the new cache's rows are what that export sends: pending.
    files = status["sinks"]["files"]
    ledger = files["datasets"]["events"]["ledger"]
    _balanced(ledger)
    assert ledger["pending"]["rows"] == 45 and ledger["exported"]["rows"] == 0, ledger
    assert files["lag_rows"] == 45
    report = await _once(doc, fresh)
    sink = report.sinks["files"]
    assert sink.ok, sink.errors
    assert sink.rows == 45
    (notice,) = sink.notices
    assert "the cache changed" in notice and "from its beginning" in notice
    assert "the cache changed" in caplog.text
    written = _parquet_rows(tmp_path / "out")
    assert len(written) == 60 + 45 and len(set(written)) == len(written)
    status = collect_status(hypaware.load_config(doc))
    (change,) = status["cache_changes"]
    assert change["new_identity"] == fresh.identity
    assert status["warnings"] == []
    ledger = status["sinks"]["files"]["datasets"]["events"]["ledger"]
    assert ledger["exported"]["rows"] == 45 and ledger["sealed"]["rows"] == 45


async def test_a_replaced_cache_archives_what_was_owed_to_the_old_one(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=30)
    sink = ScriptedSink()
    sink.mode = "fail"
    driver = ExportDriver(cache, sinks(("a", sink)), state=tmp_path / "state")
    await driver.run_once(backfill=True)
    await driver.close()
    assert driver.state.path.exists()
    shutil.rmtree(tmp_path / "cache")
    fresh = make_cache(tmp_path / "cache", count=9)
    sink.mode = "ok"
    driver = ExportDriver(fresh, sinks(("a", sink)), state=tmp_path / "state")
    report = await driver.run_once()
    changes = driver.state.cache_changes()
    await driver.close()
    (change,) = changes
    assert change.respooled > 0 and change.lost == change.respooled + change.parked
    assert report.sinks["a"].ok
    assert {r for r, n in sink.rows.items()} == all_row_ids(fresh)


async def test_two_drivers_of_different_caches_on_one_state_dir_stay_refused(
    tmp_path: Path,
) -> None:
    """The second never resets the first's progress; it may bind once the first is closed."""
    one = make_cache(tmp_path / "one", count=12)
    two = make_cache(tmp_path / "two", count=9)
    a, b = ScriptedSink(), ScriptedSink()
    first = ExportDriver(one, sinks(("a", a)), state=tmp_path / "state")
    assert (await first.run_once(backfill=True)).ok
    high_water = first.state.high_water("a", "events")
    second = ExportDriver(two, sinks(("a", b)), state=tmp_path / "state")
    report = await second.run_once(backfill=True)
    (error,) = report.sinks["a"].errors
    assert "cache.lock" in error and one.identity in error and two.identity in error
    assert "its own state_dir" in error
    assert not b.rows and second.state.cache_changes() == []
    # The first goes on where it was, its progress untouched.
    assert first.state.high_water("a", "events") == high_water
    _add(one, 500, 6)
    assert (await first.run_once()).sinks["a"].rows == 6
    assert all(n == 1 for n in a.acks.values())
    await first.close()
    # With the first gone, the second is a replaced cache: started from its beginning.
    report = await second.run_once(backfill=True)
    assert report.sinks["a"].ok and set(b.rows) == all_row_ids(two)
    (change,) = second.state.cache_changes()
    assert change.old_identity == one.identity and change.new_identity == two.identity
    await second.close()


# ------------------------------------------------------------------ start points


def test_once_then_once_with_backfill_exports_what_was_sealed_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_cache(tmp_path / "cache", count=500)
    path = tmp_path / "hypaware.json"
    path.write_text(json.dumps(_config(tmp_path)))
    assert main(["export", "--config", str(path), "--once", "--json"]) == 0
    first = json.loads(capsys.readouterr().out)["sinks"]["files"]
    assert first["rows"] == 0
    assert first["ledger"]["events"]["before_start"]["rows"] == 500
    assert main(["status", "--config", str(path), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    entry = status["sinks"]["files"]["datasets"]["events"]
    assert entry["ledger"]["before_start"]["rows"] == 500
    assert "before it, not exported" in entry["start"]
    assert main(["export", "--config", str(path), "--once", "--backfill", "--json"]) == 0
    second = json.loads(capsys.readouterr().out)["sinks"]["files"]
    assert second["rows"] == 500
    assert second["ledger"]["events"]["exported"]["rows"] == 500
    assert second["ledger"]["events"]["before_start"]["rows"] == 0
    # A second backfill has nothing left to send, and doubles nothing.
    assert main(["export", "--config", str(path), "--once", "--backfill", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sinks"]["files"]["rows"] == 0
    written = _parquet_rows(tmp_path / "out")
    assert len(written) == 500 and len(set(written)) == 500


async def test_a_daemon_fixes_its_start_at_start_up_not_at_its_first_pass(
    tmp_path: Path,
) -> None:
    cache = make_cache(tmp_path / "cache", count=12)
    before = all_row_ids(cache)
    sink = ScriptedSink()
    clock = ManualClock(T0 + timedelta(minutes=1))
    driver = ExportDriver(
        cache, [(spec("hourly", schedule="0 * * * *"), sink)], state=tmp_path / "state", clock=clock
    )
    task = asyncio.ensure_future(driver.run_forever())
    await clock.advance(timedelta(0), sleepers=1)
    # The start point reads in the driver's time, not the machine's.
    point = driver.state.start_point("hourly", "events")
    assert point is not None and point.started_at == T0 + timedelta(minutes=1)
    # Sealed after start-up, before the first (hourly) pass: exported by it.
    _add(cache, 100, 6)
    await clock.advance(timedelta(minutes=59), sleepers=1)  # 01:00
    assert set(sink.rows) == all_row_ids(cache) - before
    await driver.close()
    await asyncio.wait_for(task, PROMPT)
    # Restarted after downtime: what was sealed while it was down goes on its first pass.
    _add(cache, 200, 6)
    clock = ManualClock(T0 + timedelta(hours=5, minutes=30))
    driver = ExportDriver(
        cache, [(spec("hourly", schedule="0 * * * *"), sink)], state=tmp_path / "state", clock=clock
    )
    task = asyncio.ensure_future(driver.run_forever())
    await clock.advance(timedelta(0), sleepers=1)
    await clock.advance(timedelta(minutes=30), sleepers=1)
    assert set(sink.rows) == all_row_ids(cache) - before
    assert all(n == 1 for n in sink.acks.values())
    await driver.close()
    await asyncio.wait_for(task, PROMPT)


async def test_the_ledger_puts_every_sealed_row_in_one_bucket(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=20)  # before the start point
    sink = ScriptedSink()
    driver = ExportDriver(
        cache, sinks(("a", sink), max_partition_attempts=1), state=tmp_path / "state"
    )
    await driver.run_once()
    _add(cache, 100, 20)  # exported
    await driver.run_once()
    _add(cache, 200, 20)  # parked: fails for good on its only attempt
    sink.mode = "partial"
    sink.fail_ids = lambda pid: True
    await driver.run_once()
    sink.mode = "ok"
    _add(cache, 300, 20)  # in flight: a batch begun and never settled (a crash)
    hw = driver.state.high_water("a", "events") or 0
    crashed = cache.ready_partitions("events", after=hw)
    driver.state.begin_batch("crashed", "a", "events", [(p.id, p.seq) for p in crashed])
    _add(cache, 400, 20)  # pending: sealed after the pass
    doc = {"state_dir": str(tmp_path / "state"), "cache": {"path": str(tmp_path / "cache")}}
    status = collect_status(hypaware.load_config(doc))
    await driver.close()
    ledger = status["sinks"]["a"]["datasets"]["events"]["ledger"]
    _balanced(ledger)
    for bucket in BUCKETS:
        assert ledger[bucket]["rows"] == 20, (bucket, ledger)
    print(json.dumps(ledger))


# ------------------------------------------------------------------ blob state


async def test_lost_state_and_a_moved_root_write_to_the_new_root(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=60)
    assert (await _once(_config(tmp_path), cache, backfill=True)).ok
    (tmp_path / "state" / "progress.sqlite").unlink()
    moved = _config(tmp_path, root="elsewhere")
    report = await _once(moved, cache, backfill=True)
    assert report.ok, report.errors
    assert report.sinks["files"].rows == 60
    assert sorted(_parquet_rows(tmp_path / "elsewhere")) == sorted(all_row_ids(cache))


async def test_embedded_drivers_keep_their_sink_state_under_their_own_state_dir(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cache = make_cache(tmp_path / "cache", count=30)
    doc = _config(tmp_path)
    del doc["state_dir"]
    for app in ("one", "two"):
        driver = ExportDriver.from_config(
            hypaware.load_config(doc), cache=cache, state=tmp_path / app
        )
        try:
            assert (await driver.run_once(backfill=True)).ok
        finally:
            await driver.close()
        assert (tmp_path / app / "sinks" / "files" / "blob-batches.sqlite").exists()
    assert not (tmp_path / ".hypaware").exists()
    # Both export this cache to one root: the second finds the first's receipts there.
    written = _parquet_rows(tmp_path / "out")
    assert len(written) == 30 and set(written) == all_row_ids(cache)


async def test_a_wiped_state_dir_backfilled_to_the_same_root_doubles_nothing(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    cache = make_cache(tmp_path / "cache", count=30)
    doc = _config(tmp_path)
    assert (await _once(doc, cache, backfill=True)).sinks["files"].rows == 30
    shutil.rmtree(tmp_path / "state")
    _add(cache, 900, 10)
    report = await _once(doc, cache, backfill=True)
    sink = report.sinks["files"]
    assert sink.ok, sink.errors
    written = _parquet_rows(tmp_path / "out")
    assert len(written) == 40 and set(written) == all_row_ids(cache)
    # Acknowledged as already written, counted, and said with the identity that holds them.
    assert sink.already_held == 12 and sink.rows == 40
    (notice,) = sink.notices
    assert "never sent were already written under cache identity" in notice
    assert cache.identity in notice and "another state directory" in notice
    ledger = sink.ledger["events"]
    _balanced(ledger)
    assert ledger["exported"]["rows"] == 40


async def test_status_on_a_terminal_groups_parked_reasons_and_cuts_them_short(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    reason = "the endpoint rejected the rows (422): " + "field conv is not known; " * 12
    cache = make_cache(tmp_path / "cache", count=0)
    _add(cache, 0, 40)
    sink = ScriptedSink()
    sink.mode = "partial"
    sink.fail_ids = lambda pid: True
    sink.reason = reason
    driver = ExportDriver(
        cache, sinks(("a", sink), max_partition_attempts=1), state=tmp_path / "state"
    )
    await driver.run_once(backfill=True)
    await driver.close()
    parked = len(cache.ready_partitions("events"))
    assert parked > 2
    doc = {
        "state_dir": str(tmp_path / "state"),
        "cache": {"path": str(tmp_path / "cache")},
        "sinks": {"a": {"plugin": "@hypaware/webhook", "config": {"url": "http://127.0.0.1:9/"}}},
    }
    path = tmp_path / "hypaware.json"
    path.write_text(json.dumps(doc))
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main(["status", "--config", str(path)]) == 0
    text = capsys.readouterr().out
    lines = text.splitlines()
    (group,) = [line for line in lines if line.startswith("parked: a events:")]
    assert f"{parked} partitions since" in group and group.endswith("…")
    assert len(group) < 160 and text.count("field conv") <= 2
    (row,) = [line for line in lines if line.startswith("a ")]
    assert row.split()[:3] == ["a", "events", "0"]
    assert main(["status", "--config", str(path), "--verbose"]) == 0
    verbose = capsys.readouterr().out
    assert " ".join(reason.split()) in verbose
    assert sum(1 for line in verbose.splitlines() if "after 1 attempts" in line) == parked
