"""Rows are grouped by partition key and time bucket, each group in arrival order."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from hypaware import DatasetInfo
from hypaware.cache.partitioning import GRAINS, split_by_key

SCHEMA = pa.schema(
    [
        ("row_id", pa.int64()),
        ("ts", pa.timestamp("us", "UTC")),
        ("gateway", pa.string()),
        ("tokens", pa.int32()),
    ]
)
START = dt.datetime(2026, 1, 5, tzinfo=dt.UTC)


def reference(info: DatasetInfo, rows: list[dict]) -> dict[str, list[int]]:
    """Group in plain Python: key values (as the cache names them) and bucket start."""
    out: dict[str, list[int]] = {}
    for row in rows:
        values = {c: (None if row[c] is None else row[c]) for c in info.partition_by}
        bucket = None
        if info.time_grain is not None:
            fmt, _ = GRAINS[info.time_grain]
            ts = row["ts"]
            if info.time_grain == "minute":
                ts = ts.replace(second=0, microsecond=0)
            elif info.time_grain == "hour":
                ts = ts.replace(minute=0, second=0, microsecond=0)
            else:
                ts = ts.replace(hour=0, minute=0, second=0, microsecond=0)
            bucket = ts.strftime(fmt)
        key = repr({"partition_by": values, "bucket": bucket})
        out.setdefault(key, []).append(row["row_id"])
    return out


row = st.fixed_dictionaries(
    {
        "ts": st.integers(0, 3 * 24 * 3600 * 10**6).map(
            lambda us: START + dt.timedelta(microseconds=us)
        ),
        "gateway": st.sampled_from(["gw-1", "gw-2", "gw", "gw-1x", None, ""]),
        "tokens": st.one_of(st.none(), st.integers(-3, 3)),
    }
)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(row, min_size=1, max_size=60),
    st.sampled_from([(), ("gateway",), ("gateway", "tokens"), ("tokens",)]),
    st.sampled_from([None, "minute", "hour", "day"]),
    st.lists(st.integers(1, 7), max_size=8),
    st.integers(1, 100),
)
def test_groups_match_a_plain_grouping(
    rows: list[dict],
    partition_by: tuple[str, ...],
    grain: str | None,
    cuts: list[int],
    run_rows: int,
) -> None:
    rows = [{"row_id": i, **r} for i, r in enumerate(rows)]
    info = DatasetInfo(
        name="events", schema=SCHEMA, time_column="ts", partition_by=partition_by, time_grain=grain
    )
    # Arbitrary chunks, grouped in runs of any size: a key's rows from several
    # runs still come back as one group, in arrival order.
    batches, start = [], 0
    for size in [*cuts, len(rows)]:
        batches.append(pa.RecordBatch.from_pylist(rows[start : start + size], schema=SCHEMA))
        start += size
    table = pa.Table.from_batches(batches, schema=SCHEMA)
    got: dict[str, list[int]] = {}
    for key, group in split_by_key(info, table, run_rows=run_rows):
        name = repr(key)
        assert name not in got, f"key {name} split into two groups"
        got[name] = group.column("row_id").to_pylist()
    want = reference(info, rows)
    if not partition_by and grain is None:
        want = {repr({"partition_by": {}, "bucket": None}): [r["row_id"] for r in rows]}
    assert got == want
