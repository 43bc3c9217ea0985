"""The sample data the conformance checks export: countable rows and partitions that break."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypaware.testing.conformance.data import (
    expected_rows,
    sample_batch,
    sample_dataset,
    sample_partition,
)

DATASET = sample_dataset("ds")


@given(rows=st.integers(0, 40), seq=st.integers(0, 30), batch_rows=st.integers(1, 9))
def test_a_partition_streams_exactly_its_expected_rows(
    rows: int, seq: int, batch_rows: int
) -> None:
    part = sample_partition(DATASET, "p", rows, seq=seq, batch_rows=batch_rows)
    got = [r for b in part.open() for r in b.to_pylist()]
    assert part.row_count == rows == len(got)
    assert {r["row_id"]: r["value"] for r in got} == expected_rows("ds", "p", rows, seq=seq)
    assert all(b.num_rows <= batch_rows for b in part.open())
    if rows:
        assert part.min_time == min(r["ts"] for r in got)
        assert part.max_time == max(r["ts"] for r in got)


def test_row_ids_are_unique_across_datasets_and_partitions() -> None:
    a = expected_rows("ds", "p1", 5)
    b = expected_rows("ds", "p2", 5)
    c = expected_rows("other", "p1", 5)
    assert len({*a, *b, *c}) == 15


def test_a_partition_can_fail_on_open_or_mid_stream() -> None:
    on_open = sample_partition(DATASET, "p", 10, fail_after=0)
    with pytest.raises(OSError, match="partition 'p' cannot be read"):
        on_open.open()
    mid = sample_partition(DATASET, "p", 10, batch_rows=4, fail_after=1)
    reader = mid.open()
    assert reader.read_next_batch().num_rows == 4
    with pytest.raises(OSError, match="cannot be read"):
        reader.read_next_batch()
    custom = sample_partition(DATASET, "p", 2, fail_after=0, error=PermissionError("gone"))
    with pytest.raises(PermissionError, match="gone"):
        custom.open()


def test_each_open_starts_over() -> None:
    part = sample_partition(DATASET, "p", 6)
    assert part.open().read_all().num_rows == part.open().read_all().num_rows == 6


def test_a_batch_holds_its_partitions() -> None:
    parts = [sample_partition(DATASET, f"p{n}", n) for n in (1, 2)]
    batch = sample_batch(DATASET, parts, batch_id="b9", sink="s")
    assert (batch.batch_id, batch.sink, batch.row_count) == ("b9", "s", 3)
