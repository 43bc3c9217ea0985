"""A partition's rows as bounded, deterministic request bodies.

`chunk_rows` cuts a stream of JSON rows (from `hypaware.encoding.jsonrows`) into
chunks of at most `ChunkLimits.max_rows` rows and `ChunkLimits.max_bytes`
body bytes (before compression). A single row larger than `max_bytes` goes in
a chunk of its own; a row larger than `hard_max_bytes` is refused with
`ChunkTooLargeError`, since no endpoint would take it.

Everything is a function of the rows and the limits: the same partition gives
the same boundaries, byte-identical bodies and the same chunk id in any
process, after any restart. The id (`chunk_id`) hashes the gateway, sink,
dataset, partition id, chunk index and the SHA-256 of the uncompressed body,
so a server that has seen a chunk recognises a re-send. Compression uses
fixed settings (gzip level 6 with mtime 0, zstd level 3 without checksum):
the compressed bytes are identical for a given library build, and the id does
not depend on them.

Streaming: one chunk of bytes plus one Arrow batch of rows are in memory at a time.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Literal

import attrs

from hypaware.core.errors import ConfigError, EncodeError

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "CODECS",
    "Chunk",
    "ChunkIdentity",
    "ChunkLimits",
    "ChunkTooLargeError",
    "Codec",
    "Framing",
    "chunk_batches",
    "chunk_id",
    "chunk_rows",
    "compress",
]

Codec = Literal["none", "gzip", "zstd"]
Framing = Literal["ndjson", "json-array"]
CODECS: tuple[str, ...] = ("none", "gzip", "zstd")
CONTENT_ENCODING: dict[str, str | None] = {"none": None, "gzip": "gzip", "zstd": "zstd"}

_GZIP_LEVEL = 6
_ZSTD_LEVEL = 3


class ChunkTooLargeError(EncodeError):
    """One row is larger than the hard cap on a request body."""


def _positive(_inst: object, attribute: attrs.Attribute[int], value: int) -> None:
    if value < 1:
        raise ValueError(f"{attribute.name} must be at least 1, got {value}")


@attrs.frozen
class ChunkLimits:
    """Bounds of one chunk.

    - `max_rows` (default 5,000): rows per chunk.
    - `max_bytes` (default 4 MiB): body bytes per chunk before compression;
      a single larger row is sent alone.
    - `hard_max_bytes` (default 32 MiB): a row larger than this is refused.
    """

    max_rows: int = attrs.field(default=5_000, validator=_positive)
    max_bytes: int = attrs.field(default=4 * 1024 * 1024, validator=_positive)
    hard_max_bytes: int = attrs.field(default=32 * 1024 * 1024, validator=_positive)

    def __attrs_post_init__(self) -> None:
        if self.hard_max_bytes < self.max_bytes:
            raise ValueError(
                f"hard_max_bytes ({self.hard_max_bytes}) must be at least "
                f"max_bytes ({self.max_bytes})"
            )


@attrs.frozen
class ChunkIdentity:
    """Where a partition's chunks come from: the parts of every chunk id but index and content."""

    gateway: str
    sink: str
    dataset: str
    partition: str


@attrs.frozen
class Chunk:
    """One request body.

    `body` is what goes on the wire (compressed with `codec`); `size` is the
    uncompressed length the limits apply to; `digest` is the SHA-256 (hex) of
    the uncompressed body; `first_row` is the index of its first row within
    the partition.
    """

    index: int
    id: str
    first_row: int
    rows: int
    size: int
    digest: str
    codec: str
    body: bytes = attrs.field(repr=False)

    @property
    def content_encoding(self) -> str | None:
        """The ``Content-Encoding`` header value for `body`, or None."""
        return CONTENT_ENCODING[self.codec]


def chunk_id(identity: ChunkIdentity, index: int, digest: str) -> str:
    """The chunk's id: ``hc1-`` and 40 hex digits, a hash of identity, index and content."""
    key = json.dumps(
        [
            "hc1",
            identity.gateway,
            identity.sink,
            identity.dataset,
            identity.partition,
            index,
            digest,
        ],
        ensure_ascii=True,
        separators=(",", ":"),
    )
    return "hc1-" + hashlib.sha256(key.encode("ascii")).hexdigest()[:40]


def compress(data: bytes, codec: str) -> bytes:
    """`data` compressed with `codec` using fixed settings: same input, same bytes."""
    if codec == "none":
        return data
    if codec == "gzip":
        return gzip.compress(data, compresslevel=_GZIP_LEVEL, mtime=0)
    if codec == "zstd":
        try:
            import zstandard
        except ImportError as exc:
            raise ConfigError(
                "compression 'zstd' needs the zstandard package: pip install 'hypaware[zstd]'"
            ) from exc
        compressor = zstandard.ZstdCompressor(
            level=_ZSTD_LEVEL, write_checksum=False, write_content_size=True
        )
        out: bytes = compressor.compress(data)
        return out
    raise ConfigError(f"unknown compression {codec!r}; use one of {', '.join(CODECS)}")


def _frame(rows: list[bytes], framing: Framing) -> bytes:
    if framing == "ndjson":
        return b"".join(r + b"\n" for r in rows)
    return b"[" + b",".join(rows) + b"]"


def _framed_size(payload: int, count: int, framing: Framing) -> int:
    # NDJSON adds one newline per row; a JSON array adds brackets and count-1 commas.
    return payload + count if framing == "ndjson" else payload + count + 1


def chunk_rows(
    rows: Iterable[bytes],
    identity: ChunkIdentity,
    limits: ChunkLimits,
    *,
    codec: str = "none",
    framing: Framing = "ndjson",
) -> Iterator[Chunk]:
    """Cut `rows` (each one JSON object's bytes, no newline) into chunks, in order.

    Raises `ChunkTooLargeError` naming the partition and row for a row over
    `limits.hard_max_bytes`, before any chunk holding it is yielded.
    """
    pending: list[bytes] = []
    payload = 0
    index = 0
    first = 0

    def emit() -> Chunk:
        raw = _frame(pending, framing)
        digest = hashlib.sha256(raw).hexdigest()
        return Chunk(
            index=index,
            id=chunk_id(identity, index, digest),
            first_row=first,
            rows=len(pending),
            size=len(raw),
            digest=digest,
            codec=codec,
            body=compress(raw, codec),
        )

    for row_no, row in enumerate(rows):
        alone = _framed_size(len(row), 1, framing)
        if alone > limits.hard_max_bytes:
            raise ChunkTooLargeError(
                f"dataset {identity.dataset!r} partition {identity.partition!r}: row {row_no} "
                f"is {alone} bytes as JSON, over the hard limit of {limits.hard_max_bytes} "
                "bytes per request (hard_max_chunk_bytes)"
            )
        if pending and (
            len(pending) >= limits.max_rows
            or _framed_size(payload + len(row), len(pending) + 1, framing) > limits.max_bytes
        ):
            yield emit()
            index += 1
            first = row_no
            pending = []
            payload = 0
        pending.append(row)
        payload += len(row)
    if pending:
        yield emit()


def chunk_batches(
    batches: Iterable[pa.RecordBatch],
    identity: ChunkIdentity,
    limits: ChunkLimits,
    *,
    codec: str = "none",
    framing: Framing = "ndjson",
) -> Iterator[Chunk]:
    """`chunk_rows` over the JSON rows of Arrow `batches` (see `hypaware.encoding.jsonrows`)."""
    from hypaware.encoding.jsonrows import iter_row_bytes

    def rows() -> Iterator[bytes]:
        for batch in batches:
            yield from iter_row_bytes(batch)

    return chunk_rows(rows(), identity, limits, codec=codec, framing=framing)
