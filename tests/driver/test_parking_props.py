"""Parking, as a property: over many passes with partitions that succeed, fail for good,
fail always or fail a few times, every partition ends exported exactly once or parked
(never both, never neither); parked ones survive retention, hard caps included; and
`unpark` brings them back to be exported exactly once."""

from __future__ import annotations

import asyncio
import tempfile
from collections import Counter
from datetime import timedelta
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from hypaware.cache.local import LocalCache
from hypaware.core.types import ExportBatch, ExportOptions, ExportResult, RetryPartition
from hypaware.export.driver import ExportDriver

from .helpers import events_info, rows, spec

Behaviour = str | tuple[str, int]
BEHAVIOUR: st.SearchStrategy[Behaviour] = st.one_of(
    st.sampled_from(["ok", "fatal", "always"]),
    st.tuples(st.just("flaky"), st.integers(1, 5)),
)


class PlannedSink:
    """Each partition behaves as its plan says (by seq) until `healed`."""

    def __init__(self, plan: list[Behaviour]) -> None:
        self.plan = plan
        self.tries: Counter[str] = Counter()
        self.acks: Counter[str] = Counter()
        self.healed = False

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        exported: list[str] = []
        retry: list[RetryPartition] = []
        for part in batch.partitions:
            self.tries[part.id] += 1
            how = self.plan[part.seq - 1]
            fine = (
                self.healed
                or how == "ok"
                or (isinstance(how, tuple) and self.tries[part.id] > how[1])
            )
            if fine:
                self.acks[part.id] += 1
                exported.append(part.id)
            elif how == "fatal":
                retry.append(RetryPartition(part.id, "422 rejected", retryable=False))
            else:
                retry.append(RetryPartition(part.id, "503 unavailable"))
        return ExportResult(exported=exported, retry_partitions=retry)

    async def close(self) -> None:
        return


def expected_parked(how: Behaviour, max_attempts: int) -> bool:
    if how in ("fatal", "always"):
        return True
    if isinstance(how, tuple):
        return how[1] >= max_attempts
    return False


async def scenario(root: Path, plan: list[Behaviour], passes: int, max_attempts: int) -> None:
    # Soft retention at once: whatever no sink needs goes after every pass.
    cache = LocalCache(root / "cache", fsync=False, retention=timedelta(microseconds=1))
    cache.define_dataset(events_info())
    for i in range(len(plan)):
        cache.append("events", rows(i, 1))
        cache.seal()
    ids = {p.seq: p.id for p in cache.ready_partitions("events")}
    assert sorted(ids) == list(range(1, len(plan) + 1))
    sink = PlannedSink(plan)
    driver = ExportDriver(
        cache,
        [(spec("planned", max_partition_attempts=max_attempts), sink)],
        state=root / "state",
    )
    try:
        # Enough passes that every partition is settled one way or the other.
        for n in range(passes + max_attempts + 6):
            report = await driver.run_once(backfill=True)
            r = report.sinks["planned"]
            # Parked partitions keep a pass from being ok, even one that parked nothing new.
            assert r.ok == (not r.failures and not driver.parked("planned")), r
            assert r.failed_partitions == r.retried
            parked = {p.partition_id for p in driver.parked("planned")}
            assert max(sink.acks.values(), default=0) <= 1
            assert not parked & set(sink.acks)
            for pid in parked:
                assert cache.partition("events", pid) is not None, f"pass {n}: {pid} dropped"
            # Queries must keep reading parked partitions from the cache.
            floor = driver.state.export_floor("planned", "events")
            assert floor is not None and parked <= floor.pending
        parked = {p.partition_id for p in driver.parked("planned")}
        for seq, pid in ids.items():
            # Exactly one of the two.
            assert (pid in parked) != (sink.acks[pid] == 1), (seq, plan[seq - 1])
            assert (pid in parked) == expected_parked(plan[seq - 1], max_attempts)
        assert not driver.state.respooled("planned")

        # A hard age cap takes everything but the parked partitions.
        cache.max_age = timedelta(microseconds=1)
        cache.enforce_retention(driver.floors())
        left = {p.id for p in cache.ready_partitions("events")}
        assert left == parked

        sink.healed = True
        back = driver.unpark("planned")
        assert {p.partition_id for p in back} == parked
        report = await driver.run_once()
        assert report.ok, report
        assert driver.parked() == []
        assert set(sink.acks) == set(ids.values())
        assert max(sink.acks.values(), default=1) == 1
    finally:
        await driver.close()


@settings(max_examples=30, deadline=None)
@given(
    plan=st.lists(BEHAVIOUR, min_size=1, max_size=10),
    passes=st.integers(0, 4),
    max_attempts=st.integers(1, 4),
)
def test_every_partition_ends_exported_once_or_parked(
    plan: list[Behaviour], passes: int, max_attempts: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(scenario(Path(tmp), plan, passes, max_attempts))


class DownSink(PlannedSink):
    """Partitions planned "down" fail through the sink's fault (a 401, a missing bucket)."""

    def __init__(self, plan: list[Behaviour]) -> None:
        super().__init__(plan)
        self.faulted: list[bool] = []  # per batch handed over, in this pass

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        exported: list[str] = []
        retry: list[RetryPartition] = []
        for part in batch.partitions:
            self.tries[part.id] += 1
            if self.healed or self.plan[part.seq - 1] == "ok":
                self.acks[part.id] += 1
                exported.append(part.id)
            else:
                retry.append(RetryPartition(part.id, "401 bad token", False, sink_fault=True))
        self.faulted.append(bool(retry))
        return ExportResult(exported=exported, retry_partitions=retry)


async def halting(root: Path, plan: list[str], passes: int, batch_rows: int) -> None:
    cache = LocalCache(root / "cache", fsync=False)
    cache.define_dataset(events_info())
    for i in range(len(plan)):
        cache.append("events", rows(i, 1))
        cache.seal()
    ids = [p.id for p in cache.ready_partitions("events")]
    sink = DownSink(list(plan))
    driver = ExportDriver(
        cache,
        [(spec("down", max_partition_attempts=1, max_batch_rows=batch_rows), sink)],
        state=root / "state",
    )
    try:
        for _ in range(passes):
            sink.faulted.clear()
            r = (await driver.run_once(backfill=True)).sinks["down"]
            halt = driver.state.halted("down")
            # The sink's fault never parks, whatever max_partition_attempts says.
            assert driver.parked("down") == [] and r.parked == 0
            assert max(sink.acks.values(), default=0) <= 1
            if "down" in plan:
                assert halt is not None and r.halted is not None and not r.ok
                # A halted sink stops sending: its failing batch is the pass's last.
                assert sink.faulted.count(True) <= 1 and sink.faulted[-1] is True
                assert halt.attempts <= passes
            else:
                assert halt is None and r.ok, r
        # The cause is fixed: the next pass sends everything, no retry, no unpark.
        sink.healed = True
        r = (await driver.run_once(backfill=True)).sinks["down"]
        for _ in range(len(plan)):  # a halted sink resumes with one batch, the rest follow
            if r.ok and set(sink.acks) == set(ids):
                break
            r = (await driver.run_once(backfill=True)).sinks["down"]
        assert r.ok, r
        assert driver.state.halted("down") is None
        assert set(sink.acks) == set(ids) and max(sink.acks.values()) == 1
    finally:
        await driver.close()


@settings(max_examples=25, deadline=None)
@given(
    plan=st.lists(st.sampled_from(["ok", "down"]), min_size=1, max_size=8),
    passes=st.integers(1, 4),
    batch_rows=st.integers(1, 4),
)
def test_the_sinks_fault_halts_and_parks_nothing(
    plan: list[str], passes: int, batch_rows: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(halting(Path(tmp), plan, passes, batch_rows))


async def test_unpark_names_an_unknown_sink_or_dataset(tmp_path: Path) -> None:
    import pytest

    from hypaware.core.errors import ConfigError

    cache = LocalCache(tmp_path / "cache", fsync=False)
    cache.define_dataset(events_info())
    driver = ExportDriver(cache, [(spec("planned"), PlannedSink([]))], state=tmp_path / "state")
    try:
        with pytest.raises(ConfigError, match=r"did you mean 'planned'"):
            driver.unpark("planed")
        with pytest.raises(ConfigError, match=r"did you mean 'events'"):
            driver.unpark("planned", dataset="event")
        assert driver.unpark("planned", dataset="events") == []
    finally:
        await driver.close()
