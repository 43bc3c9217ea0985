"""Receipts: the destination's own record of which partitions a blob sink wrote.

The batch index (`hypaware.blob.batch_index`) lives in the driver's state
directory, so on its own it knows only what *this* state directory wrote.
A second state directory exporting the same cache to the same root (two
embedded apps, a daemon moved to a new host), or a state directory that was
lost and backfilled, would write every partition again. So each finished
batch also leaves a small JSON receipt at the destination, next to its
files, naming the writer (the cache identity, see `writer_key`) and the
partitions it holds. Before a batch, the sink reads the receipts it does not
know yet into its index; a partition some receipt holds is acknowledged
without being written (the driver says so, naming the identity).

Layout under the store's root::

    _hypaware=receipts/<writer>/<dataset>/<YYYY-MM-DD>/<stem>.json

The top directory can never be a dataset's (`encode_segment` escapes
``=``), and readers that discover Hive-style datasets (pyarrow, Spark,
DuckDB) skip names starting with ``_``. The day is the UTC day the receipt
was first written, by the writer's clock: a sink that has read the receipts
once reads only the days since (from the day before its last read, so a
writer's clock a little behind does not hide a receipt).

Order, so a receipt never names files that are not there: the batch's files
are complete and its stale objects deleted, then its receipt is put, then
the index marks it finished. A batch left open deletes its receipt before
its files. Two writers exporting the same partition at the very same moment
can both write it; receipts make every later pass, restart and backfill
exactly-once.
"""

from __future__ import annotations

import json
from datetime import UTC, date, datetime, timedelta
from typing import Any

import attrs

from hypaware.core.paths import encode_segment

__all__ = ["RECEIPTS_DIR", "Receipt", "ReceiptError", "day_prefixes", "receipt_path", "writer_dir"]

RECEIPTS_DIR = "_hypaware=receipts"
_FORMAT = 1


class ReceiptError(ValueError):
    """An object under the receipts directory that is not a receipt this version reads."""


@attrs.frozen
class Receipt:
    """One finished batch as its writer recorded it at the destination."""

    writer: str
    dataset: str
    stem: str
    batch_id: str
    sink: str
    partitions: tuple[str, ...]
    written_at: str

    def encode(self) -> bytes:
        doc = {"format": _FORMAT, **attrs.asdict(self)}
        doc["partitions"] = list(self.partitions)
        return json.dumps(doc, sort_keys=True).encode("utf-8")

    @classmethod
    def decode(cls, data: bytes, path: str) -> Receipt:
        try:
            doc: Any = json.loads(data)
            if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
                raise ReceiptError(f"{path}: not a format-{_FORMAT} receipt")
            parts = doc["partitions"]
            if not isinstance(parts, list) or not all(isinstance(p, str) for p in parts):
                raise ReceiptError(f"{path}: 'partitions' is not a list of ids")
            fields = ("writer", "dataset", "stem", "batch_id", "sink", "written_at")
            values = {f: doc[f] for f in fields}
            if not all(isinstance(v, str) for v in values.values()):
                raise ReceiptError(f"{path}: a field is not a string")
        except (ValueError, KeyError, TypeError) as exc:
            if isinstance(exc, ReceiptError):
                raise
            raise ReceiptError(f"{path}: not a receipt: {exc}") from None
        return cls(partitions=tuple(parts), **values)


def writer_dir(writer: str, dataset: str) -> str:
    """The directory holding every receipt of `writer` for `dataset`."""
    return f"{RECEIPTS_DIR}/{encode_segment(writer)}/{encode_segment(dataset)}"


def receipt_path(writer: str, dataset: str, stem: str, at: datetime) -> str:
    """Where the receipt of batch `stem`, first written at `at`, goes."""
    return f"{writer_dir(writer, dataset)}/{at.astimezone(UTC).date().isoformat()}/{stem}.json"


def day_prefixes(writer: str, dataset: str, since: date | None, today: date) -> list[str]:
    """The prefixes to list for receipts written since `since` (all of them when None).

    Starts the day before `since`: another writer's clock may be behind ours.
    """
    base = writer_dir(writer, dataset)
    if since is None:
        return [base]
    day = min(since, today) - timedelta(days=1)
    out = []
    while day <= today:
        out.append(f"{base}/{day.isoformat()}")
        day += timedelta(days=1)
    return out
