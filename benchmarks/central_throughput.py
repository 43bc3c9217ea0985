"""Rows per second from `@hypaware/central` to the reference server over loopback.

Compares the sink (read Arrow partitions, encode JSON rows, chunk, zstd,
POST with ids and acks) with a plain httpx loop POSTing the very same
pre-built bodies and headers, each against a fresh reference server, in one
run. The ratio is the sink's total cost over the bare HTTP cost.

    python -m benchmarks.central_throughput [--rows N] [--partitions P] [--chunk-rows C] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import time
from typing import Any

import pyarrow as pa

from hypaware import build, resolve
from hypaware.chunking import ChunkIdentity, chunk_batches
from hypaware.plugins.central import CentralWire
from hypaware.testing.central import CentralServer
from hypaware.types import DatasetInfo, ExportBatch, ExportOptions, PartitionRef

TOKEN = "bench-token"
GATEWAY = "bench-gw"
SCHEMA = pa.schema(
    [
        ("ts", pa.timestamp("us", tz="UTC")),
        ("conversation_id", pa.string()),
        ("role", pa.string()),
        ("text", pa.string()),
        ("tokens", pa.int32()),
    ]
)
DATASET = DatasetInfo(
    name="messages", schema=SCHEMA, time_column="ts", lookup_key="conversation_id"
)
WORDS = [
    "the",
    "a",
    "model",
    "user",
    "tool",
    "call",
    "result",
    "error",
    "retry",
    "cache",
    "export",
    "sink",
    "row",
    "chunk",
    "server",
]


def conversation_batch(seed: int, rows: int) -> pa.RecordBatch:
    """Seeded conversation-like rows: a few dozen conversations, alternating roles, varied text."""
    rng = random.Random(seed)
    start = 1_780_000_000_000_000 + seed * 10**9
    texts = [" ".join(rng.choices(WORDS, k=rng.randint(3, 60))) for _ in range(rows)]
    return pa.record_batch(
        [
            pa.array([start + i * 1_000 for i in range(rows)], pa.timestamp("us", "UTC")),
            pa.array([f"conv-{seed}-{rng.randint(0, 40)}" for _ in range(rows)]),
            pa.array(["user" if i % 2 == 0 else "assistant" for i in range(rows)]),
            pa.array(texts),
            pa.array([len(t) // 4 for t in texts], pa.int32()),
        ],
        schema=SCHEMA,
    )


def make_partitions(total_rows: int, partitions: int) -> list[PartitionRef]:
    per = max(1, total_rows // partitions)
    batches = {i: conversation_batch(i, per) for i in range(partitions)}

    def opener(i: int) -> Any:
        def open_() -> pa.RecordBatchReader:
            b = batches[i]
            return pa.RecordBatchReader.from_batches(
                SCHEMA, [b.slice(o, 4096) for o in range(0, b.num_rows, 4096)]
            )

        return open_

    return [
        PartitionRef(id=f"part-{i:04d}", dataset="messages", seq=i, row_count=per, opener=opener(i))
        for i in range(partitions)
    ]


async def run_sink(url: str, parts: list[PartitionRef], chunk_rows: int) -> float:
    cfg = {
        "endpoint": url,
        "token": TOKEN,
        "gateway_id": GATEWAY,
        "compression": "zstd",
        "max_chunk_rows": chunk_rows,
    }
    (plan,) = resolve({"sinks": {"fwd": {"plugin": "@hypaware/central", "config": cfg}}})
    sink = build(plan)
    batch = ExportBatch(batch_id="bench", sink="fwd", dataset=DATASET, partitions=parts)
    start = time.perf_counter()
    result = await sink.export_batch(batch, ExportOptions())
    elapsed = time.perf_counter() - start
    await sink.close()
    assert not result.retry_partitions, result.retry_partitions
    return elapsed


def prebuild(url: str, parts: list[PartitionRef], chunk_rows: int) -> list[tuple[str, bytes, dict]]:
    from hypaware.chunking import ChunkLimits

    wire = CentralWire(url, TOKEN, GATEWAY)
    limits = ChunkLimits(max_rows=chunk_rows)
    out = []
    for p in parts:
        ident = ChunkIdentity(GATEWAY, "fwd", DATASET.name, p.id)
        for c in chunk_batches(p.open(), ident, limits, codec="zstd"):
            out.append((wire.url(DATASET.name), c.body, wire.headers(c, ident)))
    return out


async def run_plain(requests: list[tuple[str, bytes, dict]]) -> float:
    import httpx

    async with httpx.AsyncClient() as client:
        start = time.perf_counter()
        for url, body, headers in requests:
            resp = await client.post(url, content=body, headers=headers)
            resp.raise_for_status()
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--chunk-rows", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs of each side")
    args = parser.parse_args()

    parts = make_partitions(args.rows, args.partitions)
    rows = sum(p.row_count for p in parts)

    sink_runs, plain_runs, encode_runs = [], [], []
    for _ in range(args.repeat):
        with CentralServer(token=TOKEN) as server:
            sink_runs.append(asyncio.run(run_sink(server.url, parts, args.chunk_rows)))
            stored = len(server.rows("messages"))
        assert stored == rows, (stored, rows)

        with CentralServer(token=TOKEN) as server:
            t0 = time.perf_counter()
            requests = prebuild(server.url, parts, args.chunk_rows)
            encode_runs.append(time.perf_counter() - t0)
            plain_runs.append(asyncio.run(run_plain(requests)))
            assert len(server.rows("messages")) == rows
    sink_s, plain_s, encode_s = min(sink_runs), min(plain_runs), min(encode_runs)
    size = sum(len(b) for _, b, _ in requests)

    print(f"rows {rows:,} in {len(parts)} partitions, {len(requests)} chunks, "
          f"{size / 1e6:.1f} MB on the wire (NDJSON + zstd)")  # fmt: skip
    print(f"best of {args.repeat} runs each")
    print(f"{'':28}{'seconds':>10}{'rows/s':>14}")
    print(f"{'@hypaware/central sink':28}{sink_s:>10.3f}{rows / sink_s:>14,.0f}")
    print(f"{'plain httpx POST loop':28}{plain_s:>10.3f}{rows / plain_s:>14,.0f}")
    print(f"{'  (pre-encoding its bodies)':28}{encode_s:>10.3f}")
    print(f"ratio sink / plain loop (time): {sink_s / plain_s:.2f}x; "
          f"sink / (encode + plain): {sink_s / (encode_s + plain_s):.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
