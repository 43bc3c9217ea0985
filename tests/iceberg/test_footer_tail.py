"""Data file statistics read from the bytes just written, not fetched back from the store."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq
from hypothesis import given, settings
from hypothesis import strategies as st

from hypaware.iceberg.datafiles import _footer_of


def parquet_bytes(rows: int, groups: int) -> bytes:
    table = pa.table({"id": list(range(rows)), "name": [f"n{i}" for i in range(rows)]})
    out = io.BytesIO()
    pq.write_table(table, out, row_group_size=max(1, rows // groups))
    return out.getvalue()


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(min_value=1, max_value=3_000),
    groups=st.integers(min_value=1, max_value=6),
    cut=st.integers(min_value=0, max_value=4_000),
)
def test_a_tail_holding_the_whole_footer_gives_the_files_metadata(
    rows: int, groups: int, cut: int
) -> None:
    data = parquet_bytes(rows, groups)
    footer = int.from_bytes(data[-8:-4], "little") + 8
    tail = data[-min(cut, len(data)) :] if cut else b""
    got = _footer_of(tail)
    if len(tail) >= footer:
        assert got is not None
        assert got.equals(pq.read_metadata(pa.BufferReader(data)))
        assert got.num_rows == rows
    else:
        assert got is None


def test_no_tail_or_one_that_is_not_parquet_means_fetch_the_footer() -> None:
    assert _footer_of(None) is None
    assert _footer_of(b"") is None
    assert _footer_of(b"not a parquet file at all") is None
    broken = b"\x00" * 64 + (40).to_bytes(4, "little") + b"PAR1"
    assert _footer_of(broken) is None
