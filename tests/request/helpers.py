"""Builders and fakes for the request-sink tests."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Any

import httpx
import pyarrow as pa

from hypaware.core.types import DatasetInfo, ExportBatch, PartitionRef
from tests.timing import PROMPT

SCHEMA = pa.schema(
    [
        ("ts", pa.timestamp("us", tz="UTC")),
        ("conversation", pa.string()),
        ("seq", pa.int64()),
        ("text", pa.string()),
    ]
)
DATASET = DatasetInfo(name="events", schema=SCHEMA, time_column="ts", lookup_key="conversation")


def make_batch(partition: str, start: int, rows: int, *, text_size: int = 8) -> pa.RecordBatch:
    """`rows` rows whose `seq` runs from `start`; deterministic content."""
    seqs = list(range(start, start + rows))
    return pa.record_batch(
        [
            pa.array([1_780_000_000_000_000 + s * 1_000 for s in seqs], pa.timestamp("us", "UTC")),
            pa.array([f"conv-{s % 7}" for s in seqs]),
            pa.array(seqs, pa.int64()),
            pa.array([f"{partition}:{s}:" + "x" * text_size for s in seqs]),
        ],
        schema=SCHEMA,
    )


def make_partition(
    pid: str, start: int, rows: int, *, seq: int = 0, batch_rows: int = 50, text_size: int = 8
) -> PartitionRef:
    """A partition whose reader yields batches of at most `batch_rows` rows."""

    def opener() -> pa.RecordBatchReader:
        batches = [
            make_batch(pid, s, min(batch_rows, start + rows - s), text_size=text_size)
            for s in range(start, start + rows, batch_rows)
        ]
        return pa.RecordBatchReader.from_batches(SCHEMA, batches)

    return PartitionRef(id=pid, dataset=DATASET.name, seq=seq, row_count=rows, opener=opener)


def make_export(partitions: Sequence[PartitionRef], *, sink: str = "fwd", batch_id: str = "b1"):
    return ExportBatch(batch_id=batch_id, sink=sink, dataset=DATASET, partitions=partitions)


class FakeClock:
    """Epoch time that moves only when the code under test sleeps."""

    def __init__(self, now: float = 1_780_000_000.0) -> None:
        self.now = now
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds
        await asyncio.sleep(0)


class ScriptedTransport(httpx.AsyncBaseTransport):
    """Answers requests from a script; records every request it saw.

    Each script item is an ``httpx.Response``, an exception instance to
    raise, or a callable taking the request and returning either. Once the
    script runs out, `default` answers.
    """

    def __init__(self, script: Sequence[Any] = (), default: Callable[..., Any] | None = None):
        self.script = list(script)
        self.requests: list[httpx.Request] = []
        self.bodies: list[bytes] = []
        self.default = default or central_ack
        self.closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        self.requests.append(request)
        self.bodies.append(body)
        item = self.script.pop(0) if self.script else self.default
        if callable(item) and not isinstance(item, httpx.Response):
            item = item(request)
        if isinstance(item, BaseException):
            raise item
        return item

    async def aclose(self) -> None:
        self.closed = True


def central_ack(request: httpx.Request) -> httpx.Response:
    """The ack a central server gives a chunk it stored."""
    return httpx.Response(
        200,
        json={
            "status": "accepted",
            "batch_id": request.headers["X-Hyp-Batch-Id"],
            "rows": int(request.headers["X-Hyp-Rows"]),
            "duplicate": False,
        },
    )


def ok(request: httpx.Request) -> httpx.Response:
    return httpx.Response(204)


async def eventually(condition: Callable[[], bool], within: float = PROMPT) -> None:
    """Wait (bounded) until `condition()` holds; it is set by another thread or task."""
    deadline = time.monotonic() + within
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {within}s")
        await asyncio.sleep(0.01)
