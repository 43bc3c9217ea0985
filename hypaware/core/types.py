"""The data that flows between the cache, the export driver and sinks.

All are frozen attrs classes. Arrow types are named only for type checkers,
so importing this module does not import pyarrow.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from datetime import datetime
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "DatasetInfo",
    "ExportBatch",
    "ExportFloor",
    "ExportOptions",
    "ExportResult",
    "MaintenanceReport",
    "ObjectMeta",
    "PartitionRef",
    "RequestEvent",
    "RetryPartition",
    "writer_key",
]


def _str_tuple(value: Iterable[str]) -> tuple[str, ...]:
    return tuple(value)


def _partition_tuple(value: Iterable[PartitionRef]) -> tuple[PartitionRef, ...]:
    return tuple(value)


def _retry_tuple(value: Iterable[RetryPartition]) -> tuple[RetryPartition, ...]:
    return tuple(value)


def _non_empty(_inst: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not value:
        raise ValueError(f"{attribute.name} must not be empty")


@attrs.frozen
class DatasetInfo:
    """A dataset held by the cache.

    `time_column` is the event-time column (a timestamp) that exports lay out
    by day; `lookup_key` is the column queries look rows up by (for example a
    conversation id) and that table formats sort by. `partition_by` and
    `time_grain` describe how the cache partitions the dataset; writers do not
    inherit them.
    """

    name: str = attrs.field(validator=_non_empty)
    schema: pa.Schema = attrs.field(eq=False)
    time_column: str = attrs.field(validator=_non_empty)
    lookup_key: str | None = None
    partition_by: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    time_grain: str | None = "hour"

    @schema.validator
    def _check_columns(self, _attribute: attrs.Attribute[pa.Schema], schema: pa.Schema) -> None:
        names = set(schema.names)
        for role, column in (("time_column", self.time_column), ("lookup_key", self.lookup_key)):
            if column is not None and column not in names:
                raise ValueError(f"dataset {self.name!r}: {role} {column!r} is not in the schema")

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DatasetInfo):
            return NotImplemented
        return (
            self.name == other.name
            and self.time_column == other.time_column
            and self.lookup_key == other.lookup_key
            and self.partition_by == other.partition_by
            and self.time_grain == other.time_grain
            and self.schema.equals(other.schema)
        )

    def __hash__(self) -> int:
        return hash((self.name, self.time_column, self.lookup_key))


@attrs.frozen
class PartitionRef:
    """A sealed cache partition, ready to export.

    `seq` orders partitions of one dataset in the order they were sealed,
    is unique within the dataset (of one cache), and is what the export
    driver's high-water compares against; sinks record it (an Iceberg
    table's exactly-once record keeps each cache's committed seqs). `id` is stable
    for the life of the partition and unique within its dataset: sinks derive
    object names and idempotency keys from it. `min_time` and `max_time`,
    when the cache knows them, bound the partition's non-null times: a blob
    sink then reads the partition once per UTC day it covers, and without
    them reads it once more to learn its days.

    `opener` makes the reader `open` returns; `loader`, when given, loads
    the whole partition for `read_all` (a cache that can do so natively).
    Both must give the same rows: replace them together (`attrs.evolve`
    keeps a loader when only the opener is changed).
    """

    id: str = attrs.field(validator=_non_empty)
    dataset: str = attrs.field(validator=_non_empty)
    seq: int
    row_count: int
    min_time: datetime | None = None
    max_time: datetime | None = None
    byte_size: int = 0
    opener: Callable[[], pa.RecordBatchReader] | None = attrs.field(
        default=None, eq=False, repr=False
    )
    loader: Callable[[], pa.Table] | None = attrs.field(default=None, eq=False, repr=False)

    def open(self) -> pa.RecordBatchReader:
        """Stream the partition's rows.

        Each call returns a fresh reader positioned at the first row; the
        caller must consume or close it. Raises `HypawareError` subclasses
        (or `OSError`) when the partition cannot be read.
        """
        if self.opener is None:
            raise ValueError(f"partition {self.dataset}/{self.id} has no reader")
        return self.opener()

    def read_all(self) -> pa.Table:
        """All the partition's rows, as one table (same rows, order and schema as `open`).

        For a sink that holds a whole partition anyway. The cache may load
        it in one native call (`loader`), which costs far less interpreter
        time than a reader's batch-by-batch hand-off; without a `loader`
        the reader from `open` is read to the end.
        """
        if self.loader is not None:
            return self.loader()
        reader = self.open()
        try:
            return reader.read_all()
        finally:
            reader.close()


def writer_key(cache_identity: str, sink: str) -> str:
    """The key one writer's partitions are scoped by at a destination.

    It is the cache identity; a batch made outside a driver has none
    (``""``), and its partitions are then scoped by the sink's name, which
    is exactly-once only while a single cache writes through that sink.
    """
    return cache_identity or f"sink:{sink}"


@attrs.frozen
class ExportBatch:
    """Partitions of one dataset handed to one sink in one `export_batch` call.

    `batch_id` is assigned by the export driver and kept across crashes and
    retries of the same batch, so a sink can derive deterministic object names
    or idempotency keys from it.

    `cache_identity` is the identity of the cache the partitions come from
    (`Cache.identity`). A partition id is unique only within its cache:
    a sink that several caches write to decides "already written" by
    (cache_identity, dataset, partition id), never by the id alone. Empty
    only for batches made by hand outside a driver.
    """

    batch_id: str = attrs.field(validator=_non_empty)
    sink: str = attrs.field(validator=_non_empty)
    dataset: DatasetInfo
    partitions: tuple[PartitionRef, ...] = attrs.field(converter=_partition_tuple)
    cache_identity: str = ""

    @partitions.validator
    def _check_partitions(
        self, _attribute: attrs.Attribute[tuple[PartitionRef, ...]], parts: tuple[PartitionRef, ...]
    ) -> None:
        seen: set[str] = set()
        for part in parts:
            if part.dataset != self.dataset.name:
                raise ValueError(
                    f"partition {part.id!r} belongs to dataset {part.dataset!r}, "
                    f"not {self.dataset.name!r}"
                )
            if part.id in seen:
                raise ValueError(f"partition {part.id!r} appears twice in batch {self.batch_id!r}")
            seen.add(part.id)

    @property
    def row_count(self) -> int:
        return sum(p.row_count for p in self.partitions)


@attrs.frozen
class ExportOptions:
    """Per-call settings from the export driver.

    `attempt` counts how many times this batch id has been handed to the sink
    (1 on the first try). `timeout` is the driver's budget for the call in
    seconds; a sink that waits inline should stay inside it.

    A sink tells the driver's observers what happens inside a call through
    the two callbacks, when they are set: `on_retry_wait(seconds, cause)`
    before each wait it takes to retry inline (`cause` a short stable label
    such as ``"http 503"``, ``"timeout"`` or ``"commit-conflict"``, never free
    text), and `on_request(event)` after each request it makes to a remote
    endpoint. Neither raises; both may be called from any thread.
    """

    attempt: int = 1
    timeout: float | None = None
    on_retry_wait: Callable[[float, str], None] | None = attrs.field(
        default=None, eq=False, repr=False
    )
    on_request: Callable[[RequestEvent], None] | None = attrs.field(
        default=None, eq=False, repr=False
    )


@attrs.frozen
class RequestEvent:
    """One request a sink made: `url` without credentials, `status` None when no reply came.

    `started_ns` is the wall-clock start (``time.time_ns()``); `error` names
    what failed (an exception type or ``"http 503"``), None on success.
    """

    method: str
    url: str
    status: int | None
    started_ns: int
    seconds: float
    error: str | None = None


@attrs.frozen
class RetryPartition:
    """A partition the sink did not export, and why: whose fault it is decides what happens.

    - The rows' fault (`retryable` False, `sink_fault` False): the rows
      cannot be delivered as they are (a 400, 413 or 422 about them, an
      encode error). The driver parks the partition; `hypaware retry`
      puts it back once the data or a limit is changed.
    - The sink's fault (`sink_fault` True): the destination or its
      configuration is wrong or unwell (credentials, a missing bucket,
      permissions, a wrong endpoint, a redirect, a full or read-only disk,
      an endpoint that cannot be reached). Nothing is parked: the partition
      stays pending, the sink is halted and tried again on a capped backoff,
      and rows flow again on their own once the cause is fixed.
    - Transient (`retryable` True): tried again at the next slot; a
      partition that fails so `max_partition_attempts` times is parked.
    """

    partition_id: str
    reason: str
    retryable: bool = True
    sink_fault: bool = False


@attrs.frozen
class ExportResult:
    """What a sink did with an `ExportBatch`.

    Every partition of the batch appears exactly once: in `exported` (acked,
    durable at the destination) or in `retry_partitions`. The counters cover
    what this call wrote.

    `already_held` names the partitions of `exported` the destination held
    before this call (an earlier attempt from the same cache identity wrote
    them) and that were therefore not written again; the driver counts and
    logs them, so no acknowledgement is silent.
    """

    exported: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    retry_partitions: tuple[RetryPartition, ...] = attrs.field(default=(), converter=_retry_tuple)
    rows_written: int = 0
    bytes_written: int = 0
    files_written: int = 0
    already_held: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)

    @retry_partitions.validator
    def _check_disjoint(
        self,
        _attribute: attrs.Attribute[tuple[RetryPartition, ...]],
        retry: tuple[RetryPartition, ...],
    ) -> None:
        both = set(self.exported) & {r.partition_id for r in retry}
        if both:
            raise ValueError(f"partitions both exported and retried: {sorted(both)}")

    @classmethod
    def failed(
        cls, batch: ExportBatch, reason: str, *, retryable: bool = True, sink_fault: bool = False
    ) -> ExportResult:
        """A result that sends every partition of `batch` back for retry."""
        return cls(
            retry_partitions=tuple(
                RetryPartition(p.id, reason, retryable, sink_fault) for p in batch.partitions
            )
        )

    def reconcile(self, batch: ExportBatch) -> ExportResult:
        """This result made to account for exactly the partitions of `batch`.

        Partitions the sink did not mention go to `retry_partitions` (nothing
        is lost); ids that are not in the batch are dropped.
        """
        ids = {p.id for p in batch.partitions}
        exported = tuple(dict.fromkeys(i for i in self.exported if i in ids))
        held = tuple(i for i in dict.fromkeys(self.already_held) if i in set(exported))
        retry: list[RetryPartition] = []
        seen = set(exported)
        for r in self.retry_partitions:
            if r.partition_id in ids and r.partition_id not in seen:
                retry.append(r)
                seen.add(r.partition_id)
        retry.extend(
            RetryPartition(p.id, "the sink did not report this partition")
            for p in batch.partitions
            if p.id not in seen
        )
        return attrs.evolve(
            self, exported=exported, retry_partitions=tuple(retry), already_held=held
        )

    @classmethod
    def merge(cls, results: Iterable[ExportResult]) -> ExportResult:
        """Add up results of disjoint sets of partitions."""
        exported: list[str] = []
        retry: list[RetryPartition] = []
        held: list[str] = []
        rows = size = files = 0
        for r in results:
            exported.extend(r.exported)
            retry.extend(r.retry_partitions)
            held.extend(r.already_held)
            rows += r.rows_written
            size += r.bytes_written
            files += r.files_written
        return cls(tuple(exported), tuple(retry), rows, size, files, tuple(held))


@attrs.frozen
class ObjectMeta:
    """What a blob store knows about one object. `path` is relative to the store's root."""

    path: str
    size: int
    last_modified: datetime | None = None
    etag: str | None = None


_MAINTENANCE_WORDS = (
    ("files_replaced", "files compacted"),
    ("files_written", "files written"),
    ("snapshots_expired", "snapshots expired"),
    ("files_deleted", "files deleted"),
    ("leftovers_deleted", "leftovers removed"),
    ("compactions_lost", "compactions lost a race"),
)


@attrs.frozen
class MaintenanceReport:
    """What one maintenance run of a sink did (`hypaware.core.contracts.MaintainedSink`).

    `datasets` maps each dataset to the counts its sink reports (for an
    Iceberg table: ``files_replaced``, ``files_written``,
    ``snapshots_expired``, ``files_deleted``, ``leftovers_deleted``, ...);
    `errors` has one line per step that failed. A failed step changes
    nothing it did not finish: maintenance never loses or doubles a row.
    """

    sink: str
    datasets: Mapping[str, Mapping[str, Any]] = attrs.field(factory=dict)
    errors: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return not self.errors

    def total(self, key: str) -> int:
        """The sum of one count over the datasets (0 where a dataset lacks it)."""
        total = 0
        for counts in self.datasets.values():
            value = counts.get(key, 0)
            if isinstance(value, int) and not isinstance(value, bool):
                total += value
        return total

    def summary(self) -> str:
        """One line, e.g. ``12 files compacted, 2 files written, 17 snapshots expired``."""
        parts = [f"{self.total(k)} {w}" for k, w in _MAINTENANCE_WORDS if self.total(k)]
        text = ", ".join(parts) or "nothing to do"
        if self.errors:
            text += f"; {len(self.errors)} failed: {self.errors[0]}"
        return text

    def as_dict(self) -> dict[str, Any]:
        return {
            "sink": self.sink,
            "ok": self.ok,
            "summary": self.summary(),
            "datasets": {k: dict(v) for k, v in self.datasets.items()},
            "errors": list(self.errors),
            "seconds": round(self.seconds, 3),
        }


@attrs.frozen
class ExportFloor:
    """What the configured sinks still need of one dataset.

    Partitions with ``seq > high_water`` and partitions named in `pending`
    (respooled or in flight for some sink) have not been exported by every
    sink that receives the dataset. Partitions named in `parked` were parked
    by some sink (they failed for good until an operator retries them): no
    retention rule drops them, hard caps included.
    """

    high_water: int
    pending: frozenset[str] = frozenset()
    parked: frozenset[str] = frozenset()

    def needs(self, part: PartitionRef) -> bool:
        return part.seq > self.high_water or part.id in self.pending
