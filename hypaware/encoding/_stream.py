"""Plumbing shared by the encoders: a pull-through batch source and a draining byte sink."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator
from typing import TYPE_CHECKING

from hypaware.core.errors import EncodeError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["BatchSource", "ChunkSink", "files", "row_groups"]


class BatchSource:
    """Batches pulled one at a time from the caller's iterable, conformed to `schema`.

    Empty batches are skipped. A batch whose types differ from the schema is
    cast; one that cannot be cast raises `EncodeError` naming the columns.
    `push_back` returns the unconsumed rest of a batch when a file rolls over.
    """

    def __init__(self, schema: pa.Schema, batches: Iterable[pa.RecordBatch]) -> None:
        self.schema = schema
        self._it = iter(batches)
        self._held: pa.RecordBatch | None = None
        self.pulled = 0

    def next(self) -> pa.RecordBatch | None:
        """The next non-empty batch, or None when the input is exhausted."""
        if self._held is not None:
            batch, self._held = self._held, None
            return batch
        for batch in self._it:
            self.pulled += 1
            if batch.num_rows:
                return self._conform(batch)
        return None

    def push_back(self, batch: pa.RecordBatch) -> None:
        assert self._held is None
        self._held = batch

    def has_more(self) -> bool:
        batch = self.next()
        if batch is None:
            return False
        self.push_back(batch)
        return True

    def _conform(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        if batch.schema.equals(self.schema):
            return batch
        import pyarrow as pa

        if batch.schema.equals(self.schema, check_metadata=False):
            # Same columns and types: carry the declared schema's metadata (e.g.
            # Iceberg field ids) rather than the batch's.
            return pa.RecordBatch.from_arrays(batch.columns, schema=self.schema)
        if batch.schema.names != self.schema.names:
            raise EncodeError(
                f"batch columns {batch.schema.names} do not match the schema's {self.schema.names}"
            )
        try:
            return batch.cast(self.schema)
        except (
            pa.ArrowNotImplementedError,
            pa.ArrowTypeError,
            # ArrowInvalid, and pyarrow's own checks (nulls cast to a
            # non-nullable field) that raise a plain ValueError
            ValueError,
        ) as exc:
            differ = [
                f"{f.name} ({_described(f)} vs {_described(batch.schema.field(f.name))})"
                for f in self.schema
                if _described(f) != _described(batch.schema.field(f.name))
            ]
            raise EncodeError(
                f"batch types cannot be cast to the schema: {', '.join(differ)}: {exc}"
            ) from exc


def _described(field: pa.Field) -> str:
    return str(field.type) if field.nullable else f"{field.type} not null"


def row_groups(
    source: BatchSource,
    *,
    max_rows: int,
    max_bytes: int,
    between: Callable[[], None] | None = None,
) -> Generator[list[pa.RecordBatch], None, None]:
    """The source's rows cut into row groups of `max_rows` rows, cut early at `max_bytes`.

    A consumer that stops after a group (its file is full) closes this
    generator; the rest of the batch being cut goes back to `source`, so
    the next file starts exactly where this one ended. `between` is called
    when a group follows another, once its first rows are in hand.
    """
    group: list[pa.RecordBatch] = []
    rows = nbytes = 0
    yielded = False
    while (batch := source.next()) is not None:
        rest: pa.RecordBatch | None = batch
        del batch
        while rest is not None:
            take = min(rest.num_rows, max_rows - rows)
            if take < rest.num_rows:
                part, rest = rest.slice(0, take), rest.slice(take)
            else:
                # No empty tail slice is kept: it would pin the whole batch's
                # buffers while the next batch is read.
                part, rest = rest, None
            if between is not None and yielded and not group:
                between()
            group.append(part)
            rows += part.num_rows
            nbytes += part.nbytes
            del part
            if rows < max_rows and nbytes < max_bytes:
                continue
            try:
                yielded = True
                yield group
            except GeneratorExit:
                if rest is not None:
                    source.push_back(rest)
                raise
            group, rows, nbytes = [], 0, 0
    if group:
        yield group


class ChunkSink:
    """A write-only file object that hands out what was written so far.

    The writer writes many pieces (page headers, pages, the footer); `take`
    hands them out in chunks of about `CHUNK_BYTES` and forgets them, so
    memory is bounded by what is written between two takes. Pieces are kept
    as written rather than appended to one growing buffer: a buffer the size
    of a row group, copied out each time, fragments the C heap and makes the
    resident set creep up over a long file.
    """

    CHUNK_BYTES = 1024 * 1024
    # Pending bytes that trigger `relay`, when one is set.
    RELAY_BYTES = 2 * 1024 * 1024

    def __init__(self) -> None:
        self._pieces: list[bytes] = []
        self._pending = 0
        self.size = 0
        self.closed = False
        # Set while a writer runs on another thread (see `_relay.relayed`):
        # called from `write` once enough is pending, to hand it out.
        self.relay: Callable[[], None] | None = None

    def write(self, data: bytes | bytearray | memoryview) -> int:
        piece = data if isinstance(data, bytes) else bytes(data)
        n = len(piece)
        if n:
            self._pieces.append(piece)
            self._pending += n
            self.size += n
            if self.relay is not None and self._pending >= self.RELAY_BYTES:
                self.relay()
        return n

    def tell(self) -> int:
        return self.size

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def writable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readable(self) -> bool:
        return False

    def take(self) -> Iterator[bytes]:
        """Everything written since the last take, as chunks of about `CHUNK_BYTES`."""
        pieces, self._pieces, self._pending = self._pieces, [], 0
        group: list[bytes] = []
        size = 0
        for piece in pieces:
            if len(piece) >= self.CHUNK_BYTES:
                if group:
                    yield b"".join(group)
                    group, size = [], 0
                yield piece
                continue
            group.append(piece)
            size += len(piece)
            if size >= self.CHUNK_BYTES:
                yield b"".join(group)
                group, size = [], 0
        if group:
            yield b"".join(group)

    def __len__(self) -> int:
        return self._pending


def files(
    source: BatchSource, write_file: Callable[[BatchSource], Iterator[bytes]]
) -> Iterator[Iterator[bytes]]:
    """One inner iterator per file, each from `write_file(source)`, until the source is dry.

    Refuses to start a file while the previous one is unfinished: the source
    is shared, so a skipped file would silently lose its rows.
    """
    current: _Tracked | None = None
    while source.has_more():
        if current is not None and not current.done:
            raise EncodeError("the previous file was not read to the end before the next one")
        current = _Tracked(write_file(source))
        yield current
    if current is not None and not current.done:
        raise EncodeError("the last file was not read to the end")


class _Tracked(Iterator[bytes]):
    __slots__ = ("_inner", "done")

    def __init__(self, inner: Iterator[bytes]) -> None:
        self._inner = inner
        self.done = False

    def __next__(self) -> bytes:
        try:
            return next(self._inner)
        except StopIteration:
            self.done = True
            raise

    def __iter__(self) -> Iterator[bytes]:
        return self

    def close(self) -> None:
        close = getattr(self._inner, "close", None)
        if close is not None:
            close()
