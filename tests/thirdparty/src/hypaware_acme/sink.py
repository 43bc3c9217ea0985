from __future__ import annotations

import json
from pathlib import Path

from hypaware import ExportBatch, ExportOptions, ExportResult, RetryPartition, SinkClosedError
from hypaware.core.resolver import BuildContext

from .manifest import RowLogConfig


class RowLogSink:
    """Appends each partition's rows, skipping partitions already logged (by id)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.closed = False

    def _logged(self) -> set[str]:
        if not self.path.exists():
            return set()
        with self.path.open(encoding="utf-8") as f:
            return {json.loads(line)["_partition"] for line in f if line.strip()}

    async def export_batch(self, batch: ExportBatch, opts: ExportOptions) -> ExportResult:
        if self.closed:
            raise SinkClosedError("rowlog sink is closed")
        done = self._logged()
        exported: list[str] = []
        retry: list[RetryPartition] = []
        rows = 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        for part in batch.partitions:
            if part.id in done:
                exported.append(part.id)
                continue
            try:
                lines = [
                    json.dumps({"_partition": part.id, **row}, default=str)
                    for b in part.open()
                    for row in b.to_pylist()
                ]
            except Exception as exc:
                retry.append(RetryPartition(part.id, str(exc)))
                continue
            with self.path.open("a", encoding="utf-8") as f:
                f.write("".join(line + "\n" for line in lines))
            rows += len(lines)
            exported.append(part.id)
        return ExportResult(exported=exported, retry_partitions=retry, rows_written=rows)

    async def close(self) -> None:
        self.closed = True


def make_sink(config: RowLogConfig, ctx: BuildContext) -> RowLogSink:
    return RowLogSink(ctx.resolve_path(config.path))
