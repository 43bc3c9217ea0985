"""Conformance checks for `hypaware.core.contracts.Sink`.

Each check is a coroutine taking a `SinkHarness` and raising
`ContractViolation` (naming the broken promise) or `CheckSkipped`. They only
use what the contract exposes plus the harness's optional ways to observe the
destination, so they run against any sink, first- or third-party.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import logging
import time
from collections import Counter
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Iterable,
    Iterator,
    Mapping,
)
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, TypeVar

import attrs

from hypaware.core.contracts import Sink
from hypaware.core.errors import SinkClosedError
from hypaware.core.types import DatasetInfo, ExportBatch, ExportOptions, ExportResult
from hypaware.testing.data import expected_rows, sample_batch, sample_dataset, sample_partition
from hypaware.testing.promises import CheckSkipped, ContractViolation, Promise

__all__ = ["SINK_CHECKS", "SinkCheck", "SinkHarness"]

T = TypeVar("T")
RowsReader = Callable[
    [DatasetInfo], Iterable[Mapping[str, Any]] | Awaitable[Iterable[Mapping[str, Any]]]
]


def _strs(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


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
      Retry-After), or None; the abort-on-close check needs it.
    - `local_root`: the local directory every file the sink writes lives
      under, if it writes local files; lets the path check see escapes.
    - `secrets`: secret values the sink was configured with; none of them
      may show up in its repr, errors or logs.
    - `close_timeout`: how long `close()` (and an export it aborts) may take.
    - `export_timeout`: how long one healthy `export_batch` may take.
    """

    make_sink: Callable[[], Sink | Awaitable[Sink]]
    read_rows: RowsReader | None = None
    stall: Callable[[], AbstractAsyncContextManager[Any]] | None = None
    local_root: Path | None = None
    secrets: tuple[str, ...] = attrs.field(default=(), converter=_strs)
    close_timeout: float = 5.0
    export_timeout: float = 60.0


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
    for name in ("rows_written", "bytes_written", "files_written"):
        value = getattr(result, name)
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


def _rows_of(batch: ExportBatch, ids: Iterable[str]) -> int:
    wanted = set(ids)
    return sum(p.row_count for p in batch.partitions if p.id in wanted)


def _check_fresh_counters(batch: ExportBatch, result: ExportResult, doing: str) -> None:
    """Counters of a call that saw these partitions for the first time."""
    exported_rows = _rows_of(batch, result.exported)
    if result.rows_written < exported_rows:
        raise ContractViolation(
            Promise.COUNTERS,
            f"{doing} exported partitions holding {exported_rows} rows but reported "
            f"rows_written={result.rows_written}",
        )


def _retried(result: ExportResult) -> dict[str, str]:
    return {r.partition_id: r.reason for r in result.retry_partitions}


def _expect_exported(result: ExportResult, ids: Iterable[str], doing: str) -> None:
    retried = _retried(result)
    for pid in ids:
        if pid in retried:
            raise ContractViolation(
                Promise.DURABLE,
                f"{doing} sent healthy partition {pid!r} back for retry "
                f"({retried[pid]}) although the destination was up",
            )


async def _landed(h: SinkHarness, dataset: DatasetInfo) -> list[tuple[str, Any]]:
    assert h.read_rows is not None
    rows = await _maybe_await(h.read_rows(dataset))
    out: list[tuple[str, Any]] = []
    for row in rows:
        if "row_id" not in row:
            raise AssertionError(
                f"read_rows({dataset.name!r}) returned a row without 'row_id': "
                "the harness must return the columns the sink was given"
            )
        out.append((str(row["row_id"]), row.get("value")))
    return out


def _sample(ids: Iterable[str]) -> str:
    ids = sorted(ids)
    shown = ", ".join(repr(i) for i in ids[:3])
    return f"{shown}{', ...' if len(ids) > 3 else ''}"


async def _check_landed(
    h: SinkHarness,
    dataset: DatasetInfo,
    expected: Mapping[str, int],
    *,
    doing: str,
    duplicate_promise: Promise = Promise.EXACTLY_ONCE,
    may_also_hold: Iterable[str] = (),
) -> None:
    """The destination holds exactly the `expected` rows of `dataset`, each once."""
    landed = await _landed(h, dataset)
    counts = Counter(row_id for row_id, _ in landed)
    doubled = {row_id: n for row_id, n in counts.items() if n > 1}
    if doubled:
        extra = sum(n - 1 for n in doubled.values())
        raise ContractViolation(
            duplicate_promise,
            f"{doing} duplicated {extra} row{'s' if extra != 1 else ''} (e.g. {_sample(doubled)})",
        )
    missing = [row_id for row_id in expected if row_id not in counts]
    if missing:
        raise ContractViolation(
            Promise.DURABLE,
            f"after {doing}, {len(missing)} row(s) of exported partitions are not at the "
            f"destination (e.g. {_sample(missing)})",
        )
    allowed = set(may_also_hold)
    stray = [row_id for row_id in counts if row_id not in expected and row_id not in allowed]
    if stray:
        raise ContractViolation(
            Promise.ACCOUNTED,
            f"after {doing}, the destination holds {len(stray)} row(s) that no exported "
            f"partition holds (e.g. {_sample(stray)})",
        )
    for row_id, value in landed:
        want = expected.get(row_id)
        if want is not None and value is not None and int(value) != want:
            raise ContractViolation(
                Promise.DURABLE,
                f"after {doing}, row {row_id!r} holds value {value!r}, not {want!r}",
            )


def _need_rows(h: SinkHarness) -> None:
    if h.read_rows is None:
        raise CheckSkipped(
            "the harness cannot read the destination back (no read_rows), so rows cannot be counted"
        )


def _expected(batch: ExportBatch, ids: Iterable[str] | None = None) -> dict[str, int]:
    wanted = None if ids is None else set(ids)
    out: dict[str, int] = {}
    for part in batch.partitions:
        if wanted is None or part.id in wanted:
            out.update(expected_rows(batch.dataset.name, part.id, part.row_count, seq=part.seq))
    return out


def _ids(batch: ExportBatch) -> list[str]:
    return [p.id for p in batch.partitions]


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


# ------------------------------------------------------------------- checks


async def check_exports_every_partition(h: SinkHarness) -> None:
    """A healthy batch is exported whole, counted right, and every row lands once."""
    batch = _healthy_batch("conformance_export", [10, 25, 1, 0])
    async with _closing(h, await _build(h)) as sink:
        doing = f"exporting batch {batch.batch_id!r} to a healthy destination"
        result = await _export(h, sink, batch, doing=doing)
        _expect_exported(result, [p.id for p in batch.partitions if p.row_count], doing)
        _check_fresh_counters(batch, result, doing)
        if h.read_rows is not None:
            await _check_landed(h, batch.dataset, _expected(batch, result.exported), doing=doing)


async def check_reexport_is_idempotent(h: SinkHarness) -> None:
    """Re-exporting a batch, on the same sink and after a restart, duplicates nothing."""
    _need_rows(h)
    batch = _healthy_batch("conformance_reexport", [10, 7])
    expected = _expected(batch)
    async with _closing(h, await _build(h)) as sink:
        first = await _export(h, sink, batch)
        _expect_exported(first, _ids(batch), f"exporting batch {batch.batch_id!r}")
        await _check_landed(h, batch.dataset, expected, doing=f"exporting batch {batch.batch_id!r}")
        doing = f"re-exporting batch {batch.batch_id!r} (attempt 2, same sink)"
        again = await _export(h, sink, batch, attempt=2, doing=doing)
        _expect_exported(again, _ids(batch), doing)
        await _check_landed(
            h, batch.dataset, expected, doing=doing, duplicate_promise=Promise.IDEMPOTENT
        )
    async with _closing(h, await _build(h)) as restarted:
        doing = f"re-exporting batch {batch.batch_id!r} (attempt 3, after a restart)"
        third = await _export(h, restarted, batch, attempt=3, doing=doing)
        _expect_exported(third, _ids(batch), doing)
        await _check_landed(
            h, batch.dataset, expected, doing=doing, duplicate_promise=Promise.IDEMPOTENT
        )


async def check_partition_failure_is_reported(h: SinkHarness) -> None:
    """A partition whose reader raises comes back for retry; its respool then lands it once."""
    dataset = sample_dataset("conformance_failure")
    good = [sample_partition(dataset, "p1", 12, seq=1), sample_partition(dataset, "p4", 9, seq=4)]
    broken_open = sample_partition(dataset, "p2", 10, seq=2, fail_after=0)
    broken_mid = sample_partition(dataset, "p3", 10, seq=3, fail_after=1)
    batch = sample_batch(dataset, [good[0], broken_open, broken_mid, good[1]], batch_id="b-fail")
    async with _closing(h, await _build(h)) as sink:
        doing = f"exporting batch {batch.batch_id!r} whose partitions 'p2' and 'p3' cannot be read"
        result = await _export(h, sink, batch, doing=doing)
        retried = _retried(result)
        for part in (broken_open, broken_mid):
            if part.id not in retried:
                raise ContractViolation(
                    Promise.REPORT_NOT_RAISE,
                    f"{doing} reported unreadable partition {part.id!r} as exported "
                    "instead of sending it back for retry",
                )
        _check_fresh_counters(batch, result, doing)
        if h.read_rows is not None:
            partial = _expected(batch, [broken_mid.id])  # a streamed prefix may have landed
            await _check_landed(
                h,
                dataset,
                _expected(batch, result.exported),
                doing=doing,
                may_also_hold=partial,
            )
        # The export driver respools what came back in a new batch of its own.
        respool = sample_batch(
            dataset,
            [
                sample_partition(dataset, p.id, p.row_count, seq=p.seq)
                for p in (broken_open, broken_mid)
                if p.id in retried
            ],
            batch_id=f"{batch.batch_id}-respool",
        )
        doing = (
            f"respooling partitions 'p2' and 'p3' of batch {batch.batch_id!r} in batch "
            f"{respool.batch_id!r} once they read again"
        )
        again = await _export(h, sink, respool, doing=doing)
        _expect_exported(again, _ids(respool), doing)
        if h.read_rows is not None:
            landed = {**_expected(batch, result.exported), **_expected(respool)}
            await _check_landed(
                h, dataset, landed, doing=doing, duplicate_promise=Promise.IDEMPOTENT
            )


async def check_export_after_close_raises(h: SinkHarness) -> None:
    """`export_batch` after `close()` raises `SinkClosedError`."""
    batch = _healthy_batch("conformance_closed", [3])
    sink = await _build(h)
    await _close_within(h, sink, "close()")
    doing = "export_batch after close()"
    try:
        result = await asyncio.wait_for(
            sink.export_batch(batch, ExportOptions(timeout=h.export_timeout)), h.export_timeout
        )
    except SinkClosedError:
        return
    except Exception as exc:
        raise ContractViolation(
            Promise.CLOSED,
            f"{doing} raised {type(exc).__name__}: {exc} instead of SinkClosedError",
        ) from exc
    raise ContractViolation(
        Promise.CLOSED, f"{doing} returned {result!r} instead of raising SinkClosedError"
    )


async def check_close_is_idempotent(h: SinkHarness) -> None:
    """`close()` twice, on a fresh and on a used sink, is quick and raises nothing."""
    fresh = await _build(h)
    await _close_within(h, fresh, "close() of a sink that exported nothing")
    await _close_within(h, fresh, "a second close()")
    used = await _build(h)
    await _export(h, used, _healthy_batch("conformance_close", [5]))
    await _close_within(h, used, "close() after an export")
    await _close_within(h, used, "a second close() after an export")


async def check_close_during_export_is_prompt(h: SinkHarness) -> None:
    """`close()` while a batch is being exported returns promptly, and so does the export."""
    batch = _healthy_batch("conformance_close_race", [400, 400, 400], batch_id="b-race")
    sink = await _build(h)
    task = asyncio.ensure_future(sink.export_batch(batch, ExportOptions(timeout=h.export_timeout)))
    await asyncio.sleep(0)
    await _await_aborted(h, sink, task, batch, "while batch 'b-race' was being exported")


async def check_close_aborts_wait(h: SinkHarness) -> None:
    """An export parked in a backoff wait returns, reporting retries, soon after `close()`."""
    if h.stall is None:
        raise CheckSkipped(
            "the harness has no stall() (a way to make the destination hold an export "
            "in a wait), so aborting a wait cannot be observed"
        )
    batch = _healthy_batch("conformance_stall", [5, 5], batch_id="b-stall")
    async with h.stall():
        sink = await _build(h)
        task = asyncio.ensure_future(
            sink.export_batch(batch, ExportOptions(timeout=h.export_timeout))
        )
        done, _ = await asyncio.wait({task}, timeout=min(0.3, h.close_timeout))
        if done:
            await _close_within(h, sink, "close()")
            raise AssertionError(
                "stall() did not make export_batch wait (it returned "
                f"{task.result()!r}); the harness must hold the destination in backpressure"
            )
        result = await _await_aborted(h, sink, task, batch, "while batch 'b-stall' was waiting")
    if result is None or result.exported:
        raise ContractViolation(
            Promise.CLOSE_PROMPT,
            "an export parked in a wait, aborted by close(), "
            + (
                "raised SinkClosedError instead of returning its partitions for retry"
                if result is None
                else f"reported {list(result.exported)} exported although nothing got through"
            ),
        )


async def _await_aborted(
    h: SinkHarness, sink: Sink, task: asyncio.Future[ExportResult], batch: ExportBatch, when: str
) -> ExportResult | None:
    try:
        await _close_within(h, sink, f"close() called {when}")
    except ContractViolation:
        task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 1.0)
        raise
    done, _ = await asyncio.wait({task}, timeout=h.close_timeout)
    if not done:
        task.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.wait_for(task, 1.0)
        raise ContractViolation(
            Promise.CLOSE_PROMPT,
            f"export_batch did not return within {h.close_timeout:g} s of a close() called {when}",
        )
    try:
        result = task.result()
    except SinkClosedError:
        return None
    except Exception as exc:
        raise ContractViolation(
            Promise.REPORT_NOT_RAISE,
            f"export_batch interrupted by close() {when} raised {type(exc).__name__}: {exc}",
        ) from exc
    _check_accounting(batch, result, f"export_batch interrupted by close() {when}")
    return result


def _files_under(root: Path) -> set[Path]:
    if not root.exists():
        return set()
    return set(root.rglob("*"))


async def check_hostile_names_stay_under_root(h: SinkHarness) -> None:
    """Dataset names and partition ids that look like paths never escape the sink's root."""
    dataset = sample_dataset("../escape/ds")
    ids = ["../../p1", "a/b", "..", "x\\y", "ü p"]
    parts = [sample_partition(dataset, pid, 3, seq=n) for n, pid in enumerate(ids, start=1)]
    batch = sample_batch(dataset, parts, batch_id="../b-hostile")
    warm = _healthy_batch("conformance_warmup", [2], batch_id="b-warm")
    async with _closing(h, await _build(h)) as sink:
        await _export(h, sink, warm)  # lets a sink create its state before the snapshot
        watch = h.local_root.resolve().parent if h.local_root is not None else None
        before = _files_under(watch) if watch is not None else set()
        doing = f"exporting dataset {dataset.name!r} with partition ids like {ids[0]!r}"
        result = await _export(h, sink, batch, doing=doing)
        if watch is not None and h.local_root is not None:
            root = h.local_root.resolve()
            escaped = sorted(
                str(p)
                for p in _files_under(watch) - before
                if p != root and root not in p.resolve().parents
            )
            if escaped:
                raise ContractViolation(
                    Promise.PATHS,
                    f"{doing} wrote {escaped[:3]} outside the sink's root {str(root)!r}",
                )
        if h.read_rows is not None:
            await _check_landed(h, dataset, _expected(batch, result.exported), doing=doing)


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.texts: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.texts.append(record.getMessage())
        except Exception:
            self.texts.append(str(record.msg))
        if record.exc_info and record.exc_info[1] is not None:
            self.texts.append(str(record.exc_info[1]))


@contextlib.contextmanager
def _capture_logs() -> Iterator[_Capture]:
    root = logging.getLogger()
    handler = _Capture()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        yield handler
    finally:
        root.removeHandler(handler)
        root.setLevel(level)


def _object_texts(obj: object) -> list[str]:
    texts = [repr(obj), str(obj)]
    fields: dict[str, Any] = dict(getattr(obj, "__dict__", {}))
    for cls in type(obj).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if hasattr(obj, slot):
                fields[slot] = getattr(obj, slot)
    for value in fields.values():
        # Plain strings (or collections of them) may legitimately hold the
        # revealed secret, e.g. to scrub it from messages; objects (configs,
        # clients, stores) must not show it in their repr.
        if not _plain_text(value):
            with contextlib.suppress(Exception):
                texts.append(repr(value))
    return texts


def _plain_text(value: object) -> bool:
    if isinstance(value, str | bytes):
        return True
    if isinstance(value, tuple | list | set | frozenset):
        return all(isinstance(v, str | bytes) for v in value)
    return False


async def check_no_secrets_in_reprs(h: SinkHarness) -> None:
    """The configured secrets appear in no repr, str, error message or log record."""
    secrets = [s for s in h.secrets if s]
    if not secrets:
        raise CheckSkipped("the harness declares no secrets to look for")
    texts: list[tuple[str, str]] = []
    dataset = sample_dataset("conformance_secrets")
    batch = sample_batch(
        dataset,
        [
            sample_partition(dataset, "p1", 4, seq=1),
            sample_partition(dataset, "p2", 4, fail_after=0),
        ],
        batch_id="b-secrets",
    )
    with _capture_logs() as logs:
        sink = await _build(h)
        texts.extend(("repr of the sink or its attributes", t) for t in _object_texts(sink))
        result = await _export(h, sink, batch)
        texts.extend(("a retry reason", r.reason) for r in result.retry_partitions)
        texts.append(("the export result", repr(result)))
        await _close_within(h, sink, "close()")
        try:
            await sink.export_batch(batch, ExportOptions())
        except Exception as exc:
            texts.append(("the error of export_batch after close()", str(exc)))
        texts.extend(("repr of the closed sink", t) for t in _object_texts(sink))
    texts.extend(("a log record", t) for t in logs.texts)
    for where, text in texts:
        for secret in secrets:
            if secret in text:
                raise ContractViolation(
                    Promise.SECRETS, f"a configured secret appears in {where}: {text[:200]!r}"
                )


SINK_CHECKS: dict[str, SinkCheck] = {
    "exports_every_partition": check_exports_every_partition,
    "reexport_is_idempotent": check_reexport_is_idempotent,
    "partition_failure_is_reported": check_partition_failure_is_reported,
    "export_after_close_raises": check_export_after_close_raises,
    "close_is_idempotent": check_close_is_idempotent,
    "close_during_export_is_prompt": check_close_during_export_is_prompt,
    "close_aborts_wait": check_close_aborts_wait,
    "hostile_names_stay_under_root": check_hostile_names_stay_under_root,
    "no_secrets_in_reprs": check_no_secrets_in_reprs,
}
