"""Rows per second from `@hypaware/central` to the reference server over loopback.

Compares the sink (read Arrow partitions, encode JSON rows, chunk, zstd,
POST with ids and acks) with a plain httpx loop POSTing the very same
pre-built bodies and headers, each against a fresh reference server, in one
run. The ratio is the sink's total cost over the bare HTTP cost. The server
runs in its own process, so it does not share an interpreter lock with the
client being measured.

    python -m benchmarks.central_throughput [--rows N] [--partitions P] [--chunk-rows C] [--repeat R]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pyarrow as pa

from hypaware import build, resolve
from hypaware.core.types import DatasetInfo, ExportBatch, ExportOptions, PartitionRef
from hypaware.request.central import CentralWire
from hypaware.request.chunking import ChunkIdentity, chunk_batches

from . import datagen

TOKEN = "bench-token"
GATEWAY = "bench-gw"
DATASET = DatasetInfo(
    name="messages", schema=datagen.SCHEMA, time_column="ts", lookup_key="conversation_id"
)


_SERVE = """
import json, sys
from hypaware.testing.servers.central import CentralServer
with CentralServer(token=sys.argv[1]) as server:
    print(server.url, flush=True)
    sys.stdin.read()
    print(json.dumps({"rows": len(server.rows("messages"))}), flush=True)
"""


@contextlib.contextmanager
def server_process() -> Iterator[tuple[str, dict[str, int]]]:
    """A reference server in a child process; yields its URL and, after exit, its row count."""
    proc = subprocess.Popen(
        [sys.executable, "-c", _SERVE, TOKEN],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdin is not None and proc.stdout is not None
    stats: dict[str, int] = {}
    try:
        url = proc.stdout.readline().strip()
        yield url, stats
        proc.stdin.close()
        stats.update(json.loads(proc.stdout.readline()))
    finally:
        if proc.poll() is None:
            proc.stdin.close()
        proc.wait(timeout=10)


def make_partitions(total_rows: int, partitions: int) -> list[PartitionRef]:
    """`benchmarks.datagen` rows (seeded, conversation-like) cut into equal partitions."""
    tbl = datagen.table(total_rows, seed=7)
    per = -(-tbl.num_rows // partitions)
    parts = []
    for i in range(partitions):
        piece = tbl.slice(i * per, per)
        if not piece.num_rows:
            break

        def opener(piece: pa.Table = piece) -> pa.RecordBatchReader:
            return piece.to_reader(max_chunksize=4096)

        parts.append(
            PartitionRef(
                id=f"part-{i:04d}",
                dataset=DATASET.name,
                seq=i,
                row_count=piece.num_rows,
                opener=opener,
            )
        )
    return parts


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
    from hypaware.request.chunking import ChunkLimits

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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=20)
    parser.add_argument("--chunk-rows", type=int, default=5_000)
    parser.add_argument("--repeat", type=int, default=3, help="best of N runs of each side")
    args = parser.parse_args(argv)

    parts = make_partitions(args.rows, args.partitions)
    rows = sum(p.row_count for p in parts)

    sink_runs, plain_runs, encode_runs = [], [], []
    for _ in range(args.repeat):
        with server_process() as (url, stats):
            sink_runs.append(asyncio.run(run_sink(url, parts, args.chunk_rows)))
        assert stats["rows"] == rows, (stats, rows)

        with server_process() as (url, stats):
            t0 = time.perf_counter()
            requests = prebuild(url, parts, args.chunk_rows)
            encode_runs.append(time.perf_counter() - t0)
            plain_runs.append(asyncio.run(run_plain(requests)))
        assert stats["rows"] == rows, (stats, rows)
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
    return 0


if __name__ == "__main__":
    sys.exit(main())
