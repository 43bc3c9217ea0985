"""The exactly-once record in a table: which partitions each cache has committed.

A partition id is unique only within the cache that made it, so the record
is kept per cache identity (`ExportBatch.cache_identity`). Every snapshot
hypaware commits carries the whole record, updated with its own batch, in
its summary::

    hypaware.writer   the identity of the cache that made this snapshot
    hypaware.writers  {"v": 1, "since": <ms>, "legacy": <bool>,
                       "w": {<identity>: {"sink": <name>, "seqs": [[lo, hi], ...]}}}

``seqs`` are the committed partitions' seqs (unique within a dataset of one
cache) as sorted, merged, inclusive intervals: a cache that exports in
order keeps one interval, however long it runs. Reading the record is one
look at the newest hypaware snapshot (`read_record`), whatever the length of
the table's history, and survives the expiry of every older snapshot: the
model is Kafka Connect's per-consumer-group record in the latest snapshot.

A snapshot made by another engine (a compaction, a delete) carries no
record; the newest one below it does. A hypaware snapshot without a record
was written before identities existed: its partition ids cannot be told
apart from another cache's, so they are never taken as committed
(``legacy`` stays set for the table, and a batch begun before ``since``, the
time the first record was committed, is still looked up by its batch id).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import attrs

from hypaware.core.types import writer_key
from hypaware.iceberg.catalog import IcebergError

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = [
    "RECORD_VERSION",
    "SUMMARY_RECORD",
    "SUMMARY_WRITER",
    "TableRecord",
    "WriterRecord",
    "read_record",
    "writer_key",
]

SUMMARY_WRITER = "hypaware.writer"
SUMMARY_RECORD = "hypaware.writers"
RECORD_VERSION = 1
_BATCH_ID = "hypaware.batch-id"

Intervals = tuple[tuple[int, int], ...]


def _merge(intervals: Iterable[tuple[int, int]]) -> Intervals:
    out: list[tuple[int, int]] = []
    for lo, hi in sorted(intervals):
        if out and lo <= out[-1][1] + 1:
            if hi > out[-1][1]:
                out[-1] = (out[-1][0], hi)
        else:
            out.append((lo, hi))
    return tuple(out)


@attrs.frozen
class WriterRecord:
    """What one cache identity has committed to the table: seq intervals, and through which sink."""

    sink: str = ""
    seqs: Intervals = ()

    def holds(self, seq: int) -> bool:
        i = bisect.bisect_right(self.seqs, seq, key=lambda iv: iv[0]) - 1
        return i >= 0 and self.seqs[i][0] <= seq <= self.seqs[i][1]

    def plus(self, seqs: Iterable[int], sink: str) -> WriterRecord:
        return WriterRecord(sink, _merge([*self.seqs, *((s, s) for s in seqs)]))

    @property
    def count(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.seqs)


@attrs.frozen
class TableRecord:
    """The record as read from one snapshot (`snapshot_id`, None for a table without one)."""

    writers: Mapping[str, WriterRecord] = attrs.field(factory=dict)
    legacy: bool = False
    since: int | None = None
    snapshot_id: int | None = None

    def of(self, key: str) -> WriterRecord:
        return self.writers.get(key) or WriterRecord()

    def with_commit(self, key: str, sink: str, seqs: Iterable[int], now_ms: int) -> TableRecord:
        writers = dict(self.writers)
        writers[key] = self.of(key).plus(seqs, sink)
        since = self.since if self.since is not None else now_ms
        return TableRecord(writers, self.legacy, since, None)

    def dumps(self) -> str:
        body: dict[str, Any] = {"v": RECORD_VERSION, "since": self.since, "legacy": self.legacy}
        body["w"] = {
            key: {"sink": rec.sink, "seqs": [list(iv) for iv in rec.seqs]}
            for key, rec in sorted(self.writers.items())
        }
        return json.dumps(body, separators=(",", ":"))


def read_record(table: Table, what: str) -> TableRecord:
    """The record of the newest snapshot that carries one, walking back past other engines'.

    Raises `IcebergError` (not retryable) naming the table and snapshot when
    a record is malformed: skipping it would take committed partitions for
    new ones and write them twice.
    """
    metadata = table.metadata
    legacy = False
    for snapshot in _ancestry(metadata.snapshots, metadata.current_snapshot_id):
        extra = snapshot.summary.additional_properties if snapshot.summary else {}
        raw = extra.get(SUMMARY_RECORD)
        if raw is not None:
            record = _parse(raw, what, snapshot.snapshot_id)
            if legacy and not record.legacy:
                record = attrs.evolve(record, legacy=True)
            return record
        if _BATCH_ID in extra:
            legacy = True
    return TableRecord({}, legacy, None, None)


def _ancestry(snapshots: Sequence[Any], current: int | None) -> Iterator[Any]:
    """The current snapshot, then its parent, and so on.

    Iceberg appends snapshots to the metadata in commit order, so an
    ancestor always sits before its child: walking the list from its end
    finds the current snapshot at once and each parent a few steps back,
    whatever the table's history. A list out of that order (nothing known
    writes one) falls back to an index built once.
    """
    target = current
    for snapshot in reversed(snapshots):
        if target is None:
            return
        if snapshot.snapshot_id == target:
            yield snapshot
            target = snapshot.parent_snapshot_id
    if target is not None:
        by_id = {s.snapshot_id: s for s in snapshots}
        for _ in range(len(snapshots)):  # bounded: a parent loop must not hang a commit
            snapshot = by_id.get(target)
            if snapshot is None:
                return
            yield snapshot
            target = snapshot.parent_snapshot_id
            if target is None:
                return


def _parse(raw: str, what: str, snapshot_id: int) -> TableRecord:
    def bad(why: str) -> IcebergError:
        return IcebergError(
            f"{what}: snapshot {snapshot_id}: the {SUMMARY_RECORD} record is malformed ({why}); "
            "it says which partitions each cache has committed, so nothing is written until "
            "it is repaired (roll the table back to the snapshot before it)",
            retryable=False,
        )

    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise bad(f"not JSON: {exc}") from None
    if not isinstance(body, dict) or body.get("v") != RECORD_VERSION:
        raise bad(f"not a version {RECORD_VERSION} record")
    since = body.get("since")
    if since is not None and not isinstance(since, int):
        raise bad("'since' is not an integer")
    entries = body.get("w")
    if not isinstance(entries, dict):
        raise bad("'w' is not an object")
    writers: dict[str, WriterRecord] = {}
    for key, entry in entries.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("sink", ""), str):
            raise bad(f"writer {key!r} is not an object with a sink name")
        seqs = entry.get("seqs")
        if not isinstance(seqs, list) or not all(
            isinstance(iv, list)
            and len(iv) == 2
            and all(isinstance(x, int) and not isinstance(x, bool) for x in iv)
            and iv[0] <= iv[1]
            for iv in seqs
        ):
            raise bad(f"writer {key!r}: 'seqs' is not a list of [low, high] integer pairs")
        writers[key] = WriterRecord(entry.get("sink", ""), _merge((a, b) for a, b in seqs))
    return TableRecord(writers, bool(body.get("legacy", False)), since, snapshot_id)
