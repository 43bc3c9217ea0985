"""The per-identity record: its interval rule, its round trip, and the walk to it."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from hypaware.iceberg.record import (
    SUMMARY_RECORD,
    TableRecord,
    WriterRecord,
    _ancestry,
    read_record,
)

seq_sets = st.lists(st.sets(st.integers(1, 300), max_size=40), min_size=1, max_size=6)


@given(seq_sets)
def test_a_writer_holds_exactly_the_seqs_it_committed(commits: list[set[int]]) -> None:
    record = WriterRecord()
    for seqs in commits:
        record = record.plus(seqs, "archive")
    committed = set().union(*commits)
    assert {s for s in range(302) if record.holds(s)} == committed
    assert record.count == len(committed)
    # Intervals are merged: sorted, disjoint and not adjacent.
    for (_, hi), (lo, _) in zip(record.seqs, record.seqs[1:], strict=False):
        assert lo > hi + 1


@given(st.dictionaries(st.text(min_size=1, max_size=12), seq_sets, max_size=4))
def test_the_record_survives_its_summary_round_trip(by_key: dict[str, list[set[int]]]) -> None:
    record = TableRecord()
    for key, commits in by_key.items():
        for seqs in commits:
            record = record.with_commit(key, "archive", seqs, 7)
    table = _table([_snap(1, None, {SUMMARY_RECORD: record.dumps()})], current=1)
    back = read_record(table, "t")
    assert dict(back.writers) == dict(record.writers)
    assert back.since == record.since


def _snap(sid: int, parent: int | None, extra: dict[str, str] | None = None) -> Any:
    summary = SimpleNamespace(additional_properties=extra or {})
    return SimpleNamespace(snapshot_id=sid, parent_snapshot_id=parent, summary=summary)


def _table(snapshots: list[Any], current: int | None) -> Any:
    return SimpleNamespace(
        metadata=SimpleNamespace(snapshots=snapshots, current_snapshot_id=current)
    )


def test_the_walk_follows_parents_not_list_order() -> None:
    # 1 <- 2 <- 4 is the current branch; 3 is a side branch committed between them.
    snaps = [_snap(1, None), _snap(2, 1), _snap(3, 2), _snap(4, 2)]
    assert [s.snapshot_id for s in _ancestry(snaps, 4)] == [4, 2, 1]
    assert [s.snapshot_id for s in _ancestry(snaps, 3)] == [3, 2, 1]
    assert list(_ancestry(snaps, None)) == []


def test_a_list_out_of_commit_order_is_still_walked_in_full() -> None:
    snaps = [_snap(3, 2), _snap(1, None), _snap(4, 3), _snap(2, 1)]
    assert [s.snapshot_id for s in _ancestry(snaps, 4)] == [4, 3, 2, 1]


def test_a_parent_loop_ends_the_walk() -> None:
    snaps = [_snap(1, 2), _snap(2, 1)]
    walked = [s.snapshot_id for s in _ancestry(snaps, 2)]
    assert walked[:2] == [2, 1] and len(walked) <= 2 + len(snaps)


def test_the_newest_record_wins_past_other_engines_snapshots() -> None:
    old = TableRecord().with_commit("a", "archive", [1], 0)
    new = old.with_commit("b", "archive", [1, 2], 0)
    snaps = [
        _snap(1, None, {SUMMARY_RECORD: old.dumps()}),
        _snap(2, 1, {SUMMARY_RECORD: new.dumps()}),
        _snap(3, 2),
        _snap(4, 3),
    ]
    assert set(read_record(_table(snaps, 4), "t").writers) == {"a", "b"}
    assert set(read_record(_table(snaps, 1), "t").writers) == {"a"}
