"""Sink checks that every row lands at the destination exactly once.

A healthy batch is exported whole and counted right; re-exporting a batch
(same sink, or after a restart) duplicates nothing; partitions that come
back under a new batch id (the driver respools a partition whose ack was
lost or late) duplicate nothing either; partitions of two caches with the
same ids both land; a partition that cannot be read comes back for retry,
and its respool lands it once. The idempotence checks need
`SinkHarness.read_rows` and fail without it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from hypaware.core.types import DatasetInfo, ExportBatch, ExportResult
from hypaware.testing.conformance.data import (
    expected_rows,
    sample_batch,
    sample_dataset,
    sample_partition,
)
from hypaware.testing.conformance.promises import ContractViolation, HookMissing, Promise
from hypaware.testing.conformance.sink_harness import (
    SinkHarness,
    _build,
    _closing,
    _export,
    _healthy_batch,
    _maybe_await,
)

__all__ = [
    "check_aligned_ids_from_two_caches_both_land",
    "check_exports_every_partition",
    "check_partition_failure_is_reported",
    "check_reexport_is_idempotent",
    "check_respool_into_new_batch_is_idempotent",
]

# ------------------------------------------------------------------ helpers


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


def _need_rows(h: SinkHarness, check: str) -> None:
    if h.read_rows is None:
        raise HookMissing(
            f"check {check!r} needs read_rows to count the rows at the destination, and the "
            "harness has none: implement read_rows, or opt out by name with "
            f"skip_checks = {{{check!r}: 'why the destination cannot be read back'}}"
        )


def _expected(
    batch: ExportBatch, ids: Iterable[str] | None = None, *, cache: str = ""
) -> dict[str, int]:
    wanted = None if ids is None else set(ids)
    out: dict[str, int] = {}
    for part in batch.partitions:
        if wanted is None or part.id in wanted:
            out.update(
                expected_rows(
                    batch.dataset.name, part.id, part.row_count, seq=part.seq, cache=cache
                )
            )
    return out


def _ids(batch: ExportBatch) -> list[str]:
    return [p.id for p in batch.partitions]


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
    _need_rows(h, "reexport_is_idempotent")
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
            h, batch.dataset, expected, doing=doing, duplicate_promise=Promise.PARTITION_IDEMPOTENT
        )
    async with _closing(h, await _build(h)) as restarted:
        doing = f"re-exporting batch {batch.batch_id!r} (attempt 3, after a restart)"
        third = await _export(h, restarted, batch, attempt=3, doing=doing)
        _expect_exported(third, _ids(batch), doing)
        await _check_landed(
            h, batch.dataset, expected, doing=doing, duplicate_promise=Promise.PARTITION_IDEMPOTENT
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
                h, dataset, landed, doing=doing, duplicate_promise=Promise.PARTITION_IDEMPOTENT
            )


async def check_respool_into_new_batch_is_idempotent(h: SinkHarness) -> None:
    """Partitions committed, then sent again in a new batch (a lost ack), land once."""
    _need_rows(h, "respool_into_new_batch_is_idempotent")
    dataset = sample_dataset("conformance_respool")
    p1, p2, p3 = (
        sample_partition(dataset, f"p{n}", rows, seq=n) for n, rows in ((1, 9), (2, 6), (3, 4))
    )
    first = sample_batch(dataset, [p1, p2], batch_id="b1")
    async with _closing(h, await _build(h)) as sink:
        doing = f"exporting batch {first.batch_id!r}"
        result = await _export(h, sink, first, doing=doing)
        _expect_exported(result, _ids(first), doing)
        await _check_landed(h, dataset, _expected(first), doing=doing)
        # The ack was lost (or came after export_timeout): the driver respools
        # both partitions into a new batch, next to one that is new.
        respool = sample_batch(dataset, [p3, p1, p2], batch_id="b7-respool")
        doing = (
            f"respooling partitions 'p1' and 'p2' of batch {first.batch_id!r}, whose ack "
            f"was lost, into a new batch {respool.batch_id!r} (with new partition 'p3')"
        )
        again = await _export(h, sink, respool, doing=doing)
        _expect_exported(again, _ids(respool), doing)
        await _check_landed(
            h,
            dataset,
            _expected(respool),
            doing=doing,
            duplicate_promise=Promise.PARTITION_IDEMPOTENT,
        )
    async with _closing(h, await _build(h)) as restarted:
        late = sample_batch(dataset, [p2], batch_id="b9-respool")
        doing = f"respooling partition 'p2' once more, in batch {late.batch_id!r}, after a restart"
        third = await _export(h, restarted, late, doing=doing)
        _expect_exported(third, _ids(late), doing)
        await _check_landed(
            h,
            dataset,
            _expected(respool),
            doing=doing,
            duplicate_promise=Promise.PARTITION_IDEMPOTENT,
        )


async def check_aligned_ids_from_two_caches_both_land(h: SinkHarness) -> None:
    """Two caches' partitions with the same ids and seqs are two partitions: both land, once."""
    _need_rows(h, "aligned_ids_from_two_caches_both_land")
    dataset = sample_dataset("conformance_caches")
    batches = [
        sample_batch(
            dataset,
            [
                sample_partition(dataset, f"p{n}", rows, seq=n, cache=cache)
                for n, rows in ((1, 8), (2, 5))
            ],
            batch_id=f"b-{cache}",
            cache_identity=f"{cache}-0000-cache",
        )
        for cache in ("gw-a", "gw-b")
    ]
    landed: dict[str, int] = {}
    async with _closing(h, await _build(h)) as sink:
        for batch, cache in zip(batches, ("gw-a", "gw-b"), strict=True):
            doing = (
                f"exporting batch {batch.batch_id!r} from cache {batch.cache_identity!r} "
                "(partitions 'p1' and 'p2', the ids and seqs the other cache uses too)"
            )
            result = await _export(h, sink, batch, doing=doing)
            _expect_exported(result, _ids(batch), doing)
            landed.update(_expected(batch, cache=cache))
            await _check_landed_scoped(h, dataset, landed, doing)
        # The second cache's ack was lost: sent again, it still lands once.
        again = batches[1]
        doing = f"re-exporting batch {again.batch_id!r} of cache {again.cache_identity!r}"
        result = await _export(h, sink, again, attempt=2, doing=doing)
        _expect_exported(result, _ids(again), doing)
        await _check_landed(
            h, dataset, landed, doing=doing, duplicate_promise=Promise.PARTITION_IDEMPOTENT
        )


async def _check_landed_scoped(
    h: SinkHarness, dataset: DatasetInfo, expected: Mapping[str, int], doing: str
) -> None:
    """As `_check_landed`; rows missing because their ids were taken as held: CACHE_SCOPED."""
    try:
        await _check_landed(h, dataset, expected, doing=doing)
    except ContractViolation as exc:
        if exc.promise is Promise.DURABLE:
            raise ContractViolation(
                Promise.CACHE_SCOPED,
                f"{exc.what}: the sink took them for the other cache's partitions with "
                "the same ids",
            ) from None
        raise
