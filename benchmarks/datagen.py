"""A reproducible generator of conversation-like events, as record batches.

Seeded: the same arguments give the same rows, byte for byte, on any
machine. Rows come out in time order over `days` days, in batches of
`batch_rows`, so millions of rows never sit in memory at once::

    from benchmarks.datagen import batches, SCHEMA
    for batch in batches(5_000_000, seed=7):
        ...

Columns: a unique `row_id`; `ts` (UTC, microseconds); `conversation_id`
(~20,000 distinct); `gateway`, `model`, `role` (a few values each);
`tokens_in`, `tokens_out`; `latency_ms`; and `text`, a 100-600 character
payload of words.
"""

from __future__ import annotations

import argparse
import functools
import itertools
from collections.abc import Iterator
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa

__all__ = ["SCHEMA", "START", "batches", "day_slices", "table"]

START = datetime(2026, 1, 5, tzinfo=UTC)
SECONDS_PER_DAY = 86_400

SCHEMA = pa.schema(
    [
        pa.field("row_id", pa.int64(), nullable=False),
        pa.field("ts", pa.timestamp("us", tz="UTC"), nullable=False),
        pa.field("conversation_id", pa.string()),
        pa.field("gateway", pa.string()),
        pa.field("model", pa.string()),
        pa.field("role", pa.string()),
        pa.field("tokens_in", pa.int32()),
        pa.field("tokens_out", pa.int32()),
        pa.field("latency_ms", pa.float64()),
        pa.field("text", pa.string()),
    ]
)

GATEWAYS = ["gw-eu-1", "gw-eu-2", "gw-us-1", "gw-us-2", "gw-ap-1"]
MODELS = [
    "opus-4",
    "sonnet-4",
    "haiku-4",
    "gpt-5",
    "gpt-5-mini",
    "gemini-3",
    "llama-4",
    "mistral-l",
]
ROLES = ["user", "assistant", "system", "tool"]
ROLE_WEIGHTS = [0.42, 0.42, 0.06, 0.10]
WORDS = [
    "the",
    "a",
    "an",
    "of",
    "to",
    "in",
    "is",
    "was",
    "for",
    "on",
    "that",
    "with",
    "as",
    "by",
    "at",
    "from",
    "this",
    "be",
    "are",
    "have",
    "it",
    "not",
    "request",
    "response",
    "token",
    "model",
    "stream",
    "user",
    "assistant",
    "tool",
    "call",
    "result",
    "error",
    "retry",
    "export",
    "cache",
    "partition",
    "sink",
    "query",
    "archive",
    "parquet",
    "table",
    "schema",
    "column",
    "row",
    "batch",
    "please",
    "could",
    "would",
    "should",
    "answer",
    "question",
    "context",
    "summary",
    "detail",
    "example",
    "value",
    "latency",
    "gateway",
    "region",
    "deploy",
    "config",
    "update",
    "memory",
    "budget",
    "limit",
    "window",
    "prompt",
]

_POOL_BYTES = 48 * 1024 * 1024


@functools.lru_cache(maxsize=2)
def _text_pool(seed: int) -> bytes:
    """Words joined by spaces, long enough to cut every batch's payloads from."""
    rng = np.random.default_rng([seed, 1])
    vocab = np.array([w.encode() for w in WORDS], dtype=object)
    out = bytearray()
    while len(out) < _POOL_BYTES:
        chosen = vocab[rng.integers(0, len(vocab), 200_000)]
        out += b" ".join(chosen.tolist())
        out += b". "
    return bytes(out[:_POOL_BYTES])


def _dictionary(values: list[str], indices: np.ndarray) -> pa.Array:
    return pa.array(values, pa.string()).take(pa.array(indices))


def batches(
    rows: int,
    *,
    seed: int = 42,
    days: int = 7,
    batch_rows: int = 65_536,
    start: datetime = START,
    conversations: int = 20_000,
    first_id: int = 0,
) -> Iterator[pa.RecordBatch]:
    """`rows` events in time order over `days` days, `batch_rows` at a time."""
    if rows <= 0:
        return
    pool = _text_pool(seed)
    pool_bytes = np.frombuffer(pool, dtype=np.uint8)
    conv_names = [f"conv-{i:05d}" for i in range(conversations)]
    start_us = int(start.timestamp()) * 1_000_000
    span_us = days * SECONDS_PER_DAY * 1_000_000
    n_batches = -(-rows // batch_rows)
    for k in range(n_batches):
        rng = np.random.default_rng([seed, 2, k])
        n = min(batch_rows, rows - k * batch_rows)
        lo = start_us + span_us * k // n_batches
        hi = start_us + span_us * (k + 1) // n_batches
        ts = np.sort(rng.integers(lo, hi, n))
        lengths = rng.integers(100, 601, n)
        total = int(lengths.sum())
        text_start = int(rng.integers(0, len(pool) - total))
        offsets = np.empty(n + 1, dtype=np.int32)
        offsets[0] = 0
        np.cumsum(lengths, out=offsets[1:])
        # Payloads are cut from the shared pool (no per-row Python strings)
        # and copied into Arrow memory, so that each batch owns its bytes as
        # one read from a cache would: windows onto the pool would make a
        # batch look far smaller in memory than the rows it carries.
        text_bytes = pa.allocate_buffer(total)
        np.frombuffer(text_bytes, dtype=np.uint8)[:] = pool_bytes[text_start : text_start + total]
        text = pa.StringArray.from_buffers(n, pa.py_buffer(offsets.tobytes()), text_bytes)
        columns = [
            pa.array(np.arange(first_id + k * batch_rows, first_id + k * batch_rows + n)),
            pa.array(ts, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            _dictionary(conv_names, rng.integers(0, conversations, n)),
            _dictionary(GATEWAYS, rng.integers(0, len(GATEWAYS), n)),
            _dictionary(MODELS, rng.integers(0, len(MODELS), n)),
            _dictionary(ROLES, rng.choice(len(ROLES), n, p=ROLE_WEIGHTS)),
            pa.array(rng.integers(1, 8_000, n, dtype=np.int32)),
            pa.array(rng.integers(1, 2_000, n, dtype=np.int32)),
            pa.array(np.round(rng.lognormal(6.0, 0.8, n), 3)),
            text,
        ]
        yield pa.RecordBatch.from_arrays(columns, schema=SCHEMA)
        # Like a file reader, keep nothing of a batch once it is handed out.
        del columns, text, text_bytes, ts


def table(rows: int, **kwargs: object) -> pa.Table:
    """All `rows` in one table, with compact buffers (for side-by-side runs)."""
    parts = [b.take(pa.array(np.arange(b.num_rows))) for b in batches(rows, **kwargs)]  # type: ignore[arg-type]
    return pa.Table.from_batches(parts, schema=SCHEMA)


def day_slices(tbl: pa.Table) -> list[pa.Table]:
    """`tbl` (time ordered) cut at UTC midnights: one zero-copy slice per day."""
    ts = tbl.column("ts").cast(pa.int64()).to_numpy()
    day_us = SECONDS_PER_DAY * 1_000_000
    days = ts // day_us
    cuts = np.flatnonzero(np.diff(days)) + 1
    bounds = [0, *cuts.tolist(), len(ts)]
    return [tbl.slice(a, b - a) for a, b in itertools.pairwise(bounds) if b > a]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    tbl = table(args.rows, seed=args.seed)
    print(tbl.schema)
    print(f"{tbl.num_rows:,} rows, {tbl.nbytes / 2**20:,.1f} MiB in Arrow")
    print(f"distinct conversations: {len(tbl.column('conversation_id').unique()):,}")
    lengths = tbl.column("text").cast(pa.large_string())
    import pyarrow.compute as pc

    print(f"text length: {pc.min(pc.utf8_length(lengths))}..{pc.max(pc.utf8_length(lengths))}")
    print(f"days: {len(day_slices(tbl))}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
