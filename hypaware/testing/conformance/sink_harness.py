"""How the sink checks reach a sink under test, and the calls they all make on it.

`SinkHarness` says how to build the sink and observe its destination. The
helpers build a sink, export a batch, and close a sink as the contract
promises, raising `ContractViolation` (naming the broken promise) when the
sink does not keep it: an export that raises, hangs or miscounts, a
`close()` that is slow or raises.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Mapping
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, TypeVar

import attrs

from hypaware.core.contracts import Sink
from hypaware.core.types import DatasetInfo, ExportBatch, ExportOptions, ExportResult
from hypaware.testing.conformance.data import sample_batch, sample_dataset, sample_partition
from hypaware.testing.conformance.promises import ContractViolation, Promise

__all__ = ["RowsReader", "SinkCheck", "SinkHarness"]

T = TypeVar("T")
RowsReader = Callable[
    [DatasetInfo], Iterable[Mapping[str, Any]] | Awaitable[Iterable[Mapping[str, Any]]]
]


def _strs(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


def _str_map(values: Mapping[str, str]) -> dict[str, str]:
    return dict(values)


@attrs.frozen
class SinkHarness:
    """How the checks reach one sink under test.

    - `make_sink`: builds a sink (sync or async). It is called several times
      in one check; every sink it returns must write to the same
      destination, which is how a check simulates a restart.
    - `read_rows`: the rows of a dataset that are at the destination (each a
      mapping with at least ``row_id`` and ``value``), or None when the
      destination cannot be read back; checks that need it are then skipped.
    - `stall`: an async context manager during which the destination makes
      `export_batch` wait (e.g. a server answering 429 with a long
      Retry-After), or None. Without it `close_aborts_wait` is skipped, and
      the skip names the missing hook; every other check still runs.
    - `local_root`: the local directory every file the sink writes lives
      under, if it writes local files; lets the path check see escapes.
    - `secrets`: secret values the sink was configured with; none of them
      may show up in its repr, errors or logs.
    - `close_timeout`: how long `close()` (and an export it aborts) may take.
    - `export_timeout`: how long one healthy `export_batch` may take.
    - `skip_checks`: checks the author opts out of, by name, each with the
      reason (printed with the skip). A check that needs a hook the harness
      lacks (e.g. `read_rows`) fails unless it is named here.
    """

    make_sink: Callable[[], Sink | Awaitable[Sink]]
    read_rows: RowsReader | None = None
    stall: Callable[[], AbstractAsyncContextManager[Any]] | None = None
    local_root: Path | None = None
    secrets: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    close_timeout: float = 5.0
    export_timeout: float = 60.0
    skip_checks: Mapping[str, str] = attrs.field(factory=dict, converter=_str_map, hash=False)


SinkCheck = Callable[[SinkHarness], Awaitable[None]]


# ------------------------------------------------------------------ helpers


async def _maybe_await(value: T | Awaitable[T]) -> T:
    if inspect.isawaitable(value):
        return await value
    return value


async def _build(h: SinkHarness) -> Sink:
    sink = await _maybe_await(h.make_sink())
    if not isinstance(sink, Sink):
        raise ContractViolation(
            Promise.SHAPE,
            f"make_sink() returned a {type(sink).__name__}, which lacks "
            "export_batch(batch, opts) or close()",
        )
    return sink


async def _export(
    h: SinkHarness, sink: Sink, batch: ExportBatch, *, attempt: int = 1, doing: str = ""
) -> ExportResult:
    doing = doing or f"exporting batch {batch.batch_id!r}"
    opts = ExportOptions(attempt=attempt, timeout=h.export_timeout)
    try:
        result = await asyncio.wait_for(sink.export_batch(batch, opts), h.export_timeout)
    except TimeoutError:
        raise ContractViolation(
            Promise.REPORT_NOT_RAISE,
            f"{doing} did not return within {h.export_timeout:g} s "
            "(ExportOptions.timeout); an export that cannot finish must report its partitions",
        ) from None
    except Exception as exc:
        raise ContractViolation(
            Promise.REPORT_NOT_RAISE,
            f"{doing} raised {type(exc).__name__}: {exc}",
        ) from exc
    _check_accounting(batch, result, doing)
    return result


def _check_accounting(batch: ExportBatch, result: object, doing: str) -> None:
    if not isinstance(result, ExportResult):
        raise ContractViolation(
            Promise.ACCOUNTED, f"{doing} returned a {type(result).__name__}, not an ExportResult"
        )
    ids = [p.id for p in batch.partitions]
    seen = Counter([*result.exported, *(r.partition_id for r in result.retry_partitions)])
    twice = sorted(i for i, n in seen.items() if n > 1)
    if twice:
        raise ContractViolation(
            Promise.ACCOUNTED, f"{doing} reported partition(s) {twice} more than once"
        )
    unknown = sorted(set(seen) - set(ids))
    if unknown:
        raise ContractViolation(
            Promise.ACCOUNTED,
            f"{doing} reported partition(s) {unknown}, which are not in the batch",
        )
    missing = [i for i in ids if i not in seen]
    if missing:
        raise ContractViolation(Promise.ACCOUNTED, f"{doing} did not report partition(s) {missing}")
    for retry in result.retry_partitions:
        if not retry.reason:
            raise ContractViolation(
                Promise.ACCOUNTED,
                f"{doing} sent partition {retry.partition_id!r} back for retry without a reason",
            )
    counters = {
        "rows_written": result.rows_written,
        "bytes_written": result.bytes_written,
        "files_written": result.files_written,
    }
    for name, value in counters.items():
        if not isinstance(value, int) or value < 0:
            raise ContractViolation(
                Promise.COUNTERS, f"{doing} reported {name}={value!r}, not a count"
            )
    if result.rows_written > batch.row_count:
        raise ContractViolation(
            Promise.COUNTERS,
            f"{doing} reported rows_written={result.rows_written} for a batch of "
            f"{batch.row_count} rows",
        )
    if result.files_written and not result.bytes_written:
        raise ContractViolation(
            Promise.COUNTERS,
            f"{doing} reported {result.files_written} file(s) written but bytes_written=0",
        )


def _healthy_batch(name: str, sizes: Iterable[int], *, batch_id: str = "b1") -> ExportBatch:
    dataset = sample_dataset(name)
    parts = [
        sample_partition(dataset, f"p{n}", rows, seq=n) for n, rows in enumerate(sizes, start=1)
    ]
    return sample_batch(dataset, parts, batch_id=batch_id)


async def _close_within(h: SinkHarness, sink: Sink, doing: str) -> None:
    started = time.monotonic()
    try:
        await asyncio.wait_for(sink.close(), h.close_timeout)
    except TimeoutError:
        raise ContractViolation(
            Promise.CLOSE_PROMPT,
            f"{doing} did not return within {h.close_timeout:g} s",
        ) from None
    except Exception as exc:
        raise ContractViolation(
            Promise.CLOSE_IDEMPOTENT, f"{doing} raised {type(exc).__name__}: {exc}"
        ) from exc
    took = time.monotonic() - started
    if took > h.close_timeout:
        # A close() that blocks the event loop cannot be interrupted by wait_for.
        raise ContractViolation(
            Promise.CLOSE_PROMPT,
            f"{doing} blocked for {took:.1f} s (more than {h.close_timeout:g} s)",
        )


@contextlib.asynccontextmanager
async def _closing(h: SinkHarness, sink: Sink) -> AsyncIterator[Sink]:
    try:
        yield sink
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(sink.close(), h.close_timeout)
