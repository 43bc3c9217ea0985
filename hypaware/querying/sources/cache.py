"""Cache partitions as a query source: their rows, filtered and projected."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from hypaware.core.query_source import filtered
from hypaware.core.types import DatasetInfo, PartitionRef
from hypaware.querying.filters import Filters

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["cache_reader"]

log = logging.getLogger(__name__)


def cache_reader(
    parts: Iterable[tuple[PartitionRef, pa.RecordBatchReader | None]],
    info: DatasetInfo,
    filters: Filters,
) -> Iterator[pa.RecordBatch]:
    """Batches of cache partitions, filtered and projected.

    A pair with a reader was opened while planning (so retention cannot take
    it away); one without is opened now and skipped if the cache dropped it.
    """
    import pyarrow as pa

    from hypaware.core.errors import CacheError

    expr = filters.expression(info)
    target = pa.schema([info.schema.field(c) for c in filters.columns])
    for part, opened in parts:
        reader = opened
        if reader is None:
            try:
                reader = part.open()
            except (CacheError, FileNotFoundError) as exc:
                log.info(
                    "cache partition %s/%s left the cache during the query: %s",
                    info.name,
                    part.id,
                    exc,
                    extra={"dataset": info.name, "partition": part.id},
                )
                continue
        columns = list(filters.columns)
        for batch in reader:
            yield from filtered(batch, expr, columns, target)
