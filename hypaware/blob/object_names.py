"""Where a `BlobSink` puts its objects: one directory per dataset and UTC day.

Layout under the store's root::

    <dataset>/date=YYYY-MM-DD/<stem>-<index>.<ext>

- ``<dataset>`` is the dataset name encoded with `hypaware.core.paths.encode_segment`.
- ``date=`` is the UTC day of the row's time column (hive style, so readers
  prune by day); rows whose time is null go to ``date=__HIVE_DEFAULT_PARTITION__``,
  the name pyarrow, Spark and Hive read back as null.
- ``<stem>`` is ``part-`` and a hash of (sink, dataset, batch id): one
  batch writes one file per day it has rows for (more when the encoder
  rolls over at its target size), holding every partition of the batch
  with rows on that day, in batch order. A cache that partitions per
  conversation still gets a few large files per export, not one per
  conversation.
- ``<index>`` counts the batch's files on that day (``0000``, ``0001``, ...).

Days are numbered from 1970-01-01 (``None`` for a null time), as Arrow's
``date32`` counts them.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, date, datetime, timedelta

__all__ = ["NULL_DAY", "batch_stem", "day_name", "day_number", "day_order"]

NULL_DAY = "__HIVE_DEFAULT_PARTITION__"
_EPOCH = date(1970, 1, 1)


def batch_stem(sink: str, dataset: str, batch_id: str) -> str:
    """The name every object of one batch starts with (before ``-<index>.<ext>``)."""
    digest = hashlib.sha256("\0".join((sink, dataset, batch_id)).encode("utf-8"))
    return f"part-{digest.hexdigest()[:32]}"


def day_name(day: int | None) -> str:
    """The ``date=`` directory name of a day."""
    return NULL_DAY if day is None else (_EPOCH + timedelta(days=day)).isoformat()


def day_number(at: datetime) -> int:
    """The UTC day of `at`."""
    # Naive times are UTC, as in the cache's Arrow timestamps without a zone.
    if at.tzinfo is not None:
        at = at.astimezone(UTC)
    return (at.date() - _EPOCH).days


def day_order(day: int | None) -> tuple[bool, int]:
    """A sort key: days in order, the null day last."""
    return (day is None, day or 0)
