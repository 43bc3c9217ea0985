"""The promises of hypaware's contracts, in the words a failing check uses.

A conformance check that fails raises `ContractViolation`, whose message says
what happened and then which promise that breaks, e.g.::

    re-exporting batch 'b1' duplicated 10 rows (e.g. 'events/p1/0'):
    export_batch must be idempotent per (dataset, partition id), not per batch (...)
"""

from __future__ import annotations

import enum

__all__ = ["CheckSkipped", "ContractViolation", "HookMissing", "Promise"]


class Promise(enum.Enum):
    """One promise of `hypaware.core.contracts`; the value is its plain-words statement."""

    SHAPE = "the object must implement the contract's methods (hypaware.core.contracts)"
    REPORT_NOT_RAISE = (
        "export_batch must report a failing partition or destination in "
        "ExportResult.retry_partitions, never raise it through the export driver"
    )
    ACCOUNTED = (
        "every partition of a batch must come back exactly once, either in "
        "ExportResult.exported or in ExportResult.retry_partitions"
    )
    COUNTERS = (
        "rows_written, bytes_written and files_written must add up to what the call "
        "wrote (at least the rows of the partitions it exported, at most the batch's rows)"
    )
    DURABLE = "a partition reported as exported must be at the destination, every row intact"
    EXACTLY_ONCE = "each row of an exported partition must land at the destination exactly once"
    PARTITION_IDEMPOTENT = (
        "export_batch must be idempotent per (dataset, partition id), not per batch: a "
        "partition exported again, under the same batch id (a crash before the ack) or "
        "respooled into a new batch (a lost or late ack, a retry), must not duplicate "
        "rows at the destination; the batch id is only for grouping"
    )
    CACHE_SCOPED = (
        "a partition is (cache identity, dataset, partition id): two caches send "
        "partitions with the same ids and seqs (each cache starts at seq 1), and a sink "
        "must not take one cache's partition for another's; scope every 'already "
        "written' decision by ExportBatch.cache_identity"
    )
    #: The former name of `PARTITION_IDEMPOTENT`.
    IDEMPOTENT = PARTITION_IDEMPOTENT
    CLOSE_IDEMPOTENT = "close() must be idempotent: a second close() is a no-op"
    CLOSE_PROMPT = (
        "close() must return promptly and abort any in-flight wait; an export_batch "
        "parked in a wait must then return, reporting its partitions for retry"
    )
    CLOSED = "export_batch after close() must raise SinkClosedError"
    PATHS = (
        "paths must stay under the store's root: an empty, absolute or '..' path is "
        "refused with PathError before any I/O, and names taken from data never "
        "climb out of the root"
    )
    NOT_FOUND = "reading a missing object must raise NotFoundError"
    ROUNDTRIP = "an object put at a path must read back byte for byte, whole"
    IF_ABSENT = (
        "put(..., if_absent=True) on an existing object must raise AlreadyExistsError "
        "and leave the object untouched"
    )
    LIST = (
        "list(prefix) must yield exactly the objects under the directory-like prefix, "
        "with paths relative to the root"
    )
    DELETE = "delete() must remove the object, and deleting a missing object is not an error"
    SECRETS = "secrets must never appear in repr(), str(), log records or error messages"
    SCAN_EXACT = (
        "QueryableSink.scan must return exactly the rows of the partitions the sink "
        "committed, each once"
    )
    SCAN_VALUES = (
        "QueryableSink.scan must return every value as it was exported, nulls included, "
        "in the dataset's exact Arrow types (a type that merely casts is not enough: "
        "epoch seconds cast to a timestamp are another time)"
    )
    SCAN_EXCLUDE = (
        "QueryableSink.scan must return no row of any partition named in exclude, "
        "and every row of every other committed partition, whichever ids exclude names"
    )
    SCAN_PROJECTION = (
        "QueryableSink.scan must return exactly the requested columns, in order, with "
        "the dataset's exact types"
    )
    SCAN_FILTER = (
        "QueryableSink.scan must return exactly the rows its filter passes (a null "
        "compared to anything does not pass), none it rejects and none missing"
    )
    ENCODER_ROLLOVER = (
        "an Encoder must begin a new file once the current one reaches its target size, "
        "and not long before: every file but the last is at least the rollover floor "
        "(default half the target) and at most the target + rollover slack; the last "
        "at most the target + rollover slack"
    )
    ENCODER_STREAMS = (
        "an Encoder must pull input batches only as it needs them, across every file: at "
        "any point it holds at most about one file's worth (target + rollover slack) of "
        "input it has not emitted bytes for, never the whole input nor, after its first "
        "file, the rest of it"
    )
    ENCODER_ORDER = (
        "an Encoder's files must be taken in order: taking the next file before the "
        "current one is read to the end must raise, not lose or reorder bytes"
    )
    ENCODER_ROWS = (
        "an Encoder's files, read back by an independent reader, must hold every input "
        "row once, and an empty input makes no file"
    )
    ENCODE_ERROR = "an Encoder must raise EncodeError for rows it cannot represent"

    @property
    def text(self) -> str:
        return self.value


class ContractViolation(AssertionError):
    """A broken promise: `promise` is which one, the message says what happened."""

    def __init__(self, promise: Promise, what: str) -> None:
        super().__init__(f"{what}: {promise.text}")
        self.promise = promise
        self.what = what


class CheckSkipped(Exception):
    """A check that cannot run for this object (an optional hook is not provided)."""


class HookMissing(Exception):
    """A check needs a harness hook the author did not provide and did not opt out of.

    A failure, not a skip: a check that silently does not run proves nothing.
    Opt out by name (``skip_checks = {"check_name": "why"}``) to skip it.
    """
