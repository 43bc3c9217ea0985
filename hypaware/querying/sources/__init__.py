"""Where a query reads rows from: cache partitions and one queryable sink, in place.

Each sink source takes a consistent view of what the sink holds and answers,
per cache partition, whether the sink vouches for all of that partition's
rows (`SinkView.claims`). The query reads claimed partitions from the sink
and the rest from the cache, and tells the view which partitions the cache
answers for so the sink never returns them too (`SinkView.reader`).

A sink provides its source through the query-source contract
(`hypaware.core.query_source.ProvidesQuerySource`), first-party sinks as
third parties do:

- Parquet blob sinks (`BlobSink` with a Parquet encoder,
  `hypaware.blob.query_source`): object names carry
  the batch (``part-<hash of sink, dataset, batch id>``) and the sink's
  `BatchIndex` says which partitions each batch holds. Files of an open
  batch are never read; a file is left out when its batch holds a partition
  the cache answers for or one still in flight. A partition is claimed when
  the progress store says the sink acknowledged it and a listed batch holds
  it; the store is read before the listing, the index after it, and a sink
  acknowledges only after every file of the batch is in place.
- Iceberg (`TableSink` over `IcebergTableFormat`, `hypaware.iceberg.query_source`):
  the table is read at one
  snapshot, and a partition is claimed when that snapshot's exactly-once
  record lists it under the query's cache identity (other caches' rows in a
  shared table are the table's to return).
- Any other `QueryableSink` (`GenericSource`): its `scan`, with partitions claimed by the
  progress store, and every partition not claimed (the cache's, pending or
  in flight) passed as `exclude`. A sink whose `scan` takes no `exclude`
  cannot be read exactly, so it is not a source at all.


`cache` reads cache partitions; `sink_source` picks the source for a
built sink.
"""

from __future__ import annotations

from typing import Any

from hypaware.blob.query_source import ParquetSource
from hypaware.core.query_source import GenericSource, ProvidesQuerySource, QuerySource, SinkView
from hypaware.iceberg.query_source import IcebergSource

__all__ = [
    "GenericSource",
    "IcebergSource",
    "ParquetSource",
    "SinkView",
    "sink_source",
]


def sink_source(name: str, sink: Any, cache_identity: str | None = None) -> QuerySource | None:
    """The query source for a built sink, or None if it cannot be read back.

    A sink that provides its own source (`ProvidesQuerySource`, as the
    first-party sinks do) is read through it; any other sink through its
    `scan`, if that takes `exclude` (`GenericSource`). `cache_identity` is
    the identity of the cache the query reads beside the sink (None for a
    cache without one).
    """
    if isinstance(sink, ProvidesQuerySource):
        return sink.query_source(name, cache_identity)
    return GenericSource(name, sink) if GenericSource.exact(sink) else None
