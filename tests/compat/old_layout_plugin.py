"""A sink plugin written against the 0.1 layout: every hypaware import is an old path.

Kept as it was written for 0.1 (apart from keying rows by cache identity,
which the suite demands of every sink), so the test beside it shows such a
plugin still imports, with warnings, and still passes the conformance suite.
"""

from __future__ import annotations

from typing import Any

import attrs
import pyarrow as pa

from hypaware.config import FieldValueError, positive
from hypaware.contracts import Sink
from hypaware.errors import SinkClosedError
from hypaware.manifest import PluginManifest
from hypaware.paths import encode_segment
from hypaware.resolver import BuildContext
from hypaware.types import ExportBatch, ExportOptions, ExportResult, RetryPartition


@attrs.frozen
class MemoryConfig:
    batch_rows: int = attrs.field(default=100, validator=positive)

    def __attrs_post_init__(self) -> None:
        if self.batch_rows > 10_000:
            raise FieldValueError("batch_rows", "at most 10000")


class MemorySink:
    """Keeps rows per (cache identity, dataset, partition id); writing one again replaces it."""

    def __init__(self, store: dict[str, list[dict[str, Any]]]) -> None:
        self.store = store
        self.closed = False

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        if self.closed:
            raise SinkClosedError("memory sink is closed")
        exported: list[str] = []
        retry: list[RetryPartition] = []
        rows = 0
        for part in batch.partitions:
            key = "/".join(
                encode_segment(s) for s in (batch.cache_identity, batch.dataset.name, part.id)
            )
            try:
                table = pa.Table.from_batches(list(part.open()), schema=batch.dataset.schema)
            except Exception as exc:
                retry.append(RetryPartition(part.id, str(exc)))
                continue
            self.store[key] = table.to_pylist()
            rows += table.num_rows
            exported.append(part.id)
        return ExportResult(exported=exported, retry_partitions=retry, rows_written=rows)

    async def close(self) -> None:
        self.closed = True

    def rows(self, dataset: str) -> list[dict[str, Any]]:
        return [
            row
            for key, rows in self.store.items()
            if key.split("/")[1] == encode_segment(dataset)
            for row in rows
        ]


def make_sink(config: MemoryConfig, ctx: BuildContext) -> Sink:
    return MemorySink({})


MANIFEST = PluginManifest(
    name="@old/memory",
    kind="sink",
    factory="tests.compat.old_layout_plugin:make_sink",
    config_class=MemoryConfig,
)
