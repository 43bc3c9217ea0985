"""Chunking: every row exactly once, in order, within the limits, and the same bytes every time."""

from __future__ import annotations

import gzip
import hashlib
import itertools
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypaware.request.chunking import (
    ChunkIdentity,
    ChunkLimits,
    ChunkTooLargeError,
    chunk_batches,
    chunk_id,
    chunk_rows,
    compress,
)

IDENT = ChunkIdentity("gw-1", "fwd", "events", "p-7")

json_rows = st.lists(
    st.dictionaries(
        st.text(max_size=5), st.one_of(st.integers(), st.text(max_size=40)), max_size=4
    ).map(lambda d: json.dumps(d, sort_keys=True, ensure_ascii=False).encode()),
    max_size=60,
)
limits = st.builds(
    lambda rows, size, extra: ChunkLimits(
        max_rows=rows, max_bytes=size, hard_max_bytes=size + extra
    ),
    st.integers(1, 12),
    st.integers(1, 400),
    st.integers(0, 2000),
)


def _unframe(raw: bytes, framing: str) -> list[bytes]:
    if framing == "ndjson":
        assert raw.endswith(b"\n")
        return raw[:-1].split(b"\n")
    return [json.dumps(v, sort_keys=True, ensure_ascii=False).encode() for v in json.loads(raw)]


@given(json_rows, limits, st.sampled_from(["ndjson", "json-array"]))
def test_chunks_cover_every_row_once_in_order_within_limits(rows, lim, framing) -> None:
    too_big = [r for r in rows if len(r) + (1 if framing == "ndjson" else 2) > lim.hard_max_bytes]
    if too_big:
        with pytest.raises(ChunkTooLargeError, match="hard_max_chunk_bytes"):
            list(chunk_rows(rows, IDENT, lim, framing=framing))
        return
    chunks = list(chunk_rows(rows, IDENT, lim, framing=framing))
    seen: list[bytes] = []
    for i, chunk in enumerate(chunks):
        assert chunk.index == i
        assert chunk.first_row == len(seen)
        assert 1 <= chunk.rows <= lim.max_rows
        assert chunk.size == len(chunk.body)
        assert chunk.size <= lim.max_bytes or chunk.rows == 1
        assert chunk.digest == hashlib.sha256(chunk.body).hexdigest()
        assert chunk.id == chunk_id(IDENT, i, chunk.digest)
        body_rows = _unframe(chunk.body, framing)
        assert len(body_rows) == chunk.rows
        seen.extend(body_rows)
    assert seen == rows
    # Cut greedily: a chunk ends only because the next row would not fit.
    for a, b in itertools.pairwise(chunks):
        grown = len(a.body) + len(rows[b.first_row]) + 1
        assert a.rows == lim.max_rows or grown > lim.max_bytes
    # Again: the same boundaries, bytes and ids.
    again = list(chunk_rows(rows, IDENT, lim, framing=framing))
    assert [(c.id, c.body) for c in again] == [(c.id, c.body) for c in chunks]


@given(
    st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.text(max_size=20)), max_size=80),
    st.lists(st.integers(1, 20), min_size=1, max_size=8),
    st.integers(1, 15),
    st.integers(30, 600),
)
def test_arrow_batches_in_any_split_give_the_same_chunks(values, cuts, max_rows, max_bytes) -> None:
    schema = pa.schema([("n", pa.int64()), ("s", pa.string())])
    lim = ChunkLimits(max_rows=max_rows, max_bytes=max_bytes, hard_max_bytes=10_000)
    whole = pa.record_batch(
        [pa.array([v[0] for v in values], pa.int64()), pa.array([v[1] for v in values])],
        schema=schema,
    )
    split: list[pa.RecordBatch] = []
    pos = 0
    for cut in cuts * (len(values) + 1):
        if pos >= len(values):
            break
        split.append(whole.slice(pos, cut))
        pos += cut
    one = list(chunk_batches([whole], IDENT, lim))
    many = list(chunk_batches(split, IDENT, lim))
    assert [(c.id, c.body) for c in one] == [(c.id, c.body) for c in many]
    decoded = [json.loads(line) for c in one for line in c.body.splitlines()]
    assert decoded == [{"n": n, "s": s} for n, s in values]


def test_a_row_over_max_bytes_goes_alone() -> None:
    lim = ChunkLimits(max_rows=10, max_bytes=20, hard_max_bytes=100)
    rows = [b"1", b"x" * 50, b"2"]
    chunks = list(chunk_rows(rows, IDENT, lim))
    assert [c.rows for c in chunks] == [1, 1, 1]
    assert chunks[1].size == 51


def test_a_row_over_the_hard_cap_is_a_clear_error() -> None:
    lim = ChunkLimits(max_rows=10, max_bytes=20, hard_max_bytes=30)
    with pytest.raises(ChunkTooLargeError) as info:
        list(chunk_rows([b"1", b"y" * 40], IDENT, lim))
    assert "row 1" in str(info.value) and "'p-7'" in str(info.value)


def test_ids_depend_on_every_part_of_the_identity() -> None:
    digest = "0" * 64
    base = chunk_id(IDENT, 0, digest)
    others = {
        chunk_id(ChunkIdentity("gw-2", "fwd", "events", "p-7"), 0, digest),
        chunk_id(ChunkIdentity("gw-1", "other", "events", "p-7"), 0, digest),
        chunk_id(ChunkIdentity("gw-1", "fwd", "logs", "p-7"), 0, digest),
        chunk_id(ChunkIdentity("gw-1", "fwd", "events", "p-8"), 0, digest),
        chunk_id(IDENT, 1, digest),
        chunk_id(IDENT, 0, "1" * 64),
    }
    assert base not in others and len(others) == 6
    # No ambiguity from separators inside the parts.
    assert chunk_id(ChunkIdentity("a,b", "c", "d", "e"), 0, digest) != chunk_id(
        ChunkIdentity("a", "b,c", "d", "e"), 0, digest
    )


def test_compression_is_deterministic_and_decodes() -> None:
    import zstandard

    data = b'{"a":1}\n' * 1000
    assert compress(data, "gzip") == compress(data, "gzip")
    assert gzip.decompress(compress(data, "gzip")) == data
    assert compress(data, "zstd") == compress(data, "zstd")
    assert zstandard.ZstdDecompressor().decompress(compress(data, "zstd")) == data
    assert compress(data, "none") is data


def test_limits_are_checked() -> None:
    with pytest.raises(ValueError, match="max_rows"):
        ChunkLimits(max_rows=0)
    with pytest.raises(ValueError, match="hard_max_bytes"):
        ChunkLimits(max_bytes=100, hard_max_bytes=50)


_CHILD = textwrap.dedent(
    """
    import hashlib, json, sys
    from hypaware.request.chunking import ChunkIdentity, ChunkLimits, chunk_batches
    from tests.request.helpers import make_partition
    codec, framing = sys.argv[1], sys.argv[2]
    part = make_partition("p-42", 0, 333, batch_rows=37, text_size=30)
    lim = ChunkLimits(max_rows=40, max_bytes=3000)
    ident = ChunkIdentity("gw", "fwd", "events", part.id)
    out = [(c.id, hashlib.sha256(c.body).hexdigest(), c.rows)
           for c in chunk_batches(part.open(), ident, lim, codec=codec, framing=framing)]
    print(json.dumps(out))
    """
)


@pytest.mark.parametrize(
    ("codec", "framing"), [("none", "ndjson"), ("gzip", "ndjson"), ("zstd", "json-array")]
)
def test_a_fresh_process_makes_the_same_chunks(codec: str, framing: str) -> None:
    from .helpers import make_partition

    part = make_partition("p-42", 0, 333, batch_rows=37, text_size=30)
    lim = ChunkLimits(max_rows=40, max_bytes=3000)
    ident = ChunkIdentity("gw", "fwd", "events", part.id)
    here = [
        [c.id, hashlib.sha256(c.body).hexdigest(), c.rows]
        for c in chunk_batches(part.open(), ident, lim, codec=codec, framing=framing)
    ]
    child = subprocess.run(
        [sys.executable, "-c", _CHILD, codec, framing],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "PYTHONHASHSEED": "4242"},  # another process, another hash seed
    )
    assert json.loads(child.stdout) == here
    assert sum(r for _, _, r in here) == 333 and len(here) > 5
