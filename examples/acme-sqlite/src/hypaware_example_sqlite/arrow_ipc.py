"""``@acme/arrow-ipc``: an `Encoder` writing the Arrow IPC file format.

Streaming: each record batch is written as soon as it is pulled, and the
bytes the writer produced are handed to the caller before the next batch is
pulled, so memory holds about one record batch whatever the input's size.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

from hypaware import BuildContext, EncodeError

from .manifests import ArrowIpcConfig

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["ArrowIpcEncoder", "make_encoder"]


class _Chunks:
    """A write-only file object that hands over what was written since the last drain."""

    def __init__(self) -> None:
        self.closed = False
        self.size = 0
        self._pending: list[bytes] = []

    def write(self, data: bytes | memoryview) -> int:
        chunk = bytes(data)
        self._pending.append(chunk)
        self.size += len(chunk)
        return len(chunk)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def drain(self) -> Iterator[bytes]:
        pending, self._pending = self._pending, []
        yield from pending


class ArrowIpcEncoder:
    """Arrow IPC files (``.arrow``), rolling over to a new file at `max_file_bytes`."""

    extension = "arrow"
    media_type = "application/vnd.apache.arrow.file"

    def __init__(self, compression: str | None = None, max_file_bytes: int = 128 << 20) -> None:
        self.compression = compression
        self.max_file_bytes = max_file_bytes

    def __repr__(self) -> str:
        return (
            f"ArrowIpcEncoder(compression={self.compression!r}, "
            f"max_file_bytes={self.max_file_bytes})"
        )

    def encode(
        self, schema: pa.Schema, batches: Iterable[pa.RecordBatch]
    ) -> Iterator[Iterator[bytes]]:
        """One iterator of bytes per file; no file for an empty input."""
        source = iter(batches)
        pending = next(source, None)
        while pending is not None:
            carry: list[pa.RecordBatch | None] = []
            yield self._file(schema, pending, source, carry)
            if not carry:
                raise RuntimeError("each file's bytes must be consumed before the next file")
            pending = carry[0]

    def _file(
        self,
        schema: pa.Schema,
        first: pa.RecordBatch,
        source: Iterator[pa.RecordBatch],
        carry: list[pa.RecordBatch | None],
    ) -> Iterator[bytes]:
        import pyarrow as pa
        import pyarrow.ipc as ipc

        out = _Chunks()
        options = ipc.IpcWriteOptions(compression=self.compression)
        batch: pa.RecordBatch | None = first
        with ipc.new_file(out, schema, options=options) as writer:
            while batch is not None:
                try:
                    writer.write_batch(batch)
                except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
                    raise EncodeError(f"arrow-ipc: cannot write a record batch: {exc}") from exc
                yield from out.drain()
                batch = next(source, None)
                if out.size >= self.max_file_bytes:
                    break
        yield from out.drain()
        carry.append(batch)


def make_encoder(config: ArrowIpcConfig, ctx: BuildContext) -> ArrowIpcEncoder:
    """The factory named by the ``@acme/arrow-ipc`` manifest."""
    return ArrowIpcEncoder(config.compression, config.max_file_bytes)
