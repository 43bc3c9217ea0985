"""The day grouping and sort order rule, checked on generated rows."""

from __future__ import annotations

import datetime as dt
from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypaware.iceberg import day_layout

pytestmark = pytest.mark.iceberg

MICROS_PER_DAY = 86_400_000_000
times = st.one_of(
    st.none(),
    st.integers(min_value=-400 * MICROS_PER_DAY, max_value=400 * MICROS_PER_DAY),
)
keys = st.one_of(st.none(), st.sampled_from(["a", "b", "c", "d"]))


def _check_plan(table: pa.Table, key: str | None) -> None:
    plan = day_layout.plan_days(table, "ts", key)
    assert sum(p.rows for p in plan) == table.num_rows
    days = [p.day for p in plan]
    assert days == sorted(d for d in days if d is not None) + ([None] if None in days else [])
    schema = table.schema
    seen = 0
    for rows in plan:
        out = pa.Table.from_batches(list(day_layout.day_batches(table, rows, schema)), schema)
        shared = day_layout.day_batches(table, rows, schema, whole=table.combine_chunks)
        assert pa.Table.from_batches(list(shared), schema).equals(out)
        assert out.num_rows == rows.rows
        _check_pieces(table, rows, out)
        seen += out.num_rows
        micros = out.column("ts").cast(pa.int64()).to_pylist()
        for m in micros:
            if rows.day is None:
                assert m is None
            else:
                assert m is not None
                assert m // MICROS_PER_DAY == rows.day
        ks = out.column(key).to_pylist() if key else [None] * out.num_rows
        sort_keys = [
            (k is None, k or "", m is None, m or 0) for k, m in zip(ks, micros, strict=True)
        ]
        assert sort_keys == sorted(sort_keys)
    assert seen == table.num_rows


def _check_pieces(table: pa.Table, rows: day_layout.DayRows, whole: pa.Table) -> None:
    """Split in pieces, a day keeps its rows and their order; pieces are about equal."""
    for n in (2, 3):
        parts = day_layout.split_day(rows, n)
        assert len(parts) == min(n, rows.rows)
        assert [(p.day, p.piece, p.pieces) for p in parts] == [
            (rows.day, i, len(parts) if len(parts) > 1 else 1) for i in range(len(parts))
        ]
        sizes = [p.rows for p in parts]
        assert sum(sizes) == rows.rows and max(sizes) - min(sizes) <= 1
        joined = [b for p in parts for b in day_layout.day_batches(table, p, whole.schema)]
        assert pa.Table.from_batches(joined, whole.schema).equals(whole)
        shared = [
            b
            for p in parts
            for b in day_layout.day_batches(table, p, whole.schema, whole=table.combine_chunks)
        ]
        assert pa.Table.from_batches(shared, whole.schema).equals(whole)


def test_piece_file_indices_never_meet() -> None:
    assert day_layout.piece_file_index(0, 0) == 0
    assert day_layout.piece_file_index(1, 0) > day_layout.piece_file_index(0, 9_999)
    with pytest.raises(ValueError, match="more than 10000 files"):
        day_layout.piece_file_index(0, 10_000)


@given(st.lists(st.tuples(times, keys), max_size=200), st.booleans(), st.booleans())
def test_days_are_single_days_in_order_and_sorted_within(
    rows: list[tuple[int | None, str | None]], zoned: bool, keyed: bool
) -> None:
    ts_type = pa.timestamp("us", tz="UTC" if zoned else None)
    table = pa.table(
        {
            "ts": pa.array([t for t, _ in rows], pa.int64()).cast(ts_type),
            "k": pa.array([k for _, k in rows], pa.string()),
        }
    )
    _check_plan(table, "k" if keyed else None)


run = st.tuples(
    st.sampled_from(["a", "b", "c"]),
    st.integers(min_value=0, max_value=3 * MICROS_PER_DAY),
    st.integers(min_value=1, max_value=30),
    st.integers(min_value=1, max_value=3_600_000_000),
)


@given(st.lists(run, min_size=1, max_size=40))
def test_run_shaped_input_like_cache_partitions(runs: list[tuple[str, int, int, int]]) -> None:
    """Chunks of one key in time order (as cache partitions are), possibly overlapping."""
    chunks = []
    for key, start, count, step in runs:
        chunks.append(
            pa.table(
                {
                    "ts": pa.array([start + i * step for i in range(count)], pa.int64()).cast(
                        pa.timestamp("us", tz="UTC")
                    ),
                    "k": pa.array([key] * count, pa.string()),
                }
            )
        )
    _check_plan(pa.concat_tables(chunks), "k")


@given(
    st.lists(
        st.tuples(st.integers(min_value=0, max_value=MICROS_PER_DAY // 3), keys),
        min_size=2,
        max_size=200,
    ),
    st.integers(min_value=0, max_value=5),
    st.booleans(),
)
def test_rows_in_time_order_are_grouped_in_the_order_a_sort_gives(
    rows: list[tuple[int, str | None]], null_times: int, keyed: bool
) -> None:
    """The grouping shortcut for time-ordered rows (as a cache's are) orders rows as the sort
    does, ties in input order; rows out of time order are left to the sort."""
    micros, start = [], 0
    for step, _ in rows:
        start += step  # steps of 0: rows of equal time, which must keep their input order
        micros.append(start)
    ts = pa.array(micros + [None] * null_times, pa.int64()).cast(pa.timestamp("us", tz="UTC"))
    key = pa.array([k for _, k in rows] + [None] * null_times, pa.string()) if keyed else None
    days = day_layout.day_numbers(ts).fill_null(day_layout._NULL_DAY)
    filled = ts.cast(pa.int64()).fill_null(day_layout._NULL_TIME)
    grouped = day_layout._grouped_order(days, key, filled, min_rows=2)
    assert grouped is not None
    assert grouped.to_pylist() == day_layout._sort_order(days, key, filled).to_pylist()
    table = pa.table({"ts": ts, "k": key if keyed else pa.nulls(len(ts), pa.string())})
    with mock.patch.object(day_layout, "_GROUPED_MIN_ROWS", 2):
        _check_plan(table, "k" if keyed else None)
    if len(set(micros)) > 1:
        backwards = pa.array(list(reversed(micros)), pa.int64())
        assert (
            day_layout._grouped_order(days.slice(0, len(micros)), None, backwards, min_rows=2)
            is None
        )
    # Fewer rows than the grouping pays for: left to the sort.
    assert day_layout._grouped_order(days, key, filled) is None


@given(st.integers(min_value=-1_000_000, max_value=3_000_000))
def test_day_labels_are_iso_dates_or_day_numbers(day: int) -> None:
    label = day_layout.day_label(day)
    try:
        expected = (dt.date(1970, 1, 1) + dt.timedelta(days=day)).isoformat()
    except OverflowError:
        expected = str(day)
    assert label == expected
    assert day_layout.day_label(None) == "null"


@given(st.text(min_size=1), st.lists(st.text(min_size=1), unique=True, max_size=20))
def test_batch_identity_ignores_partition_order_but_not_membership(
    batch_id: str, ids: list[str]
) -> None:
    digest = day_layout.batch_digest(batch_id, ids)
    assert digest == day_layout.batch_digest(batch_id, list(reversed(ids)))
    if ids:
        assert digest != day_layout.batch_digest(batch_id, ids[1:])
    stem = day_layout.data_file_stem("sink/x", "ds", digest)
    assert "/" not in stem
    assert day_layout.owned_by(day_layout.data_file_name(stem, 3), stem)
    assert not day_layout.owned_by(day_layout.data_file_name(stem + "0", 3), stem)
