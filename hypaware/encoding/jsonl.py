"""The JSON Lines encoder behind ``@hypaware/format-jsonl``.

Rows become JSON objects through `hypaware.encoding.jsonrows` (keys in schema order,
ISO-8601 UTC timestamps with ``Z``, byte-for-byte deterministic), one per
line, UTF-8. Batches are serialised `lines_per_chunk` rows at a time and
compressed as a stream, so memory stays at one chunk whatever the input.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING

from hypaware.core.errors import ConfigError
from hypaware.encoding._stream import BatchSource, files
from hypaware.encoding.config import JsonlConfig
from hypaware.encoding.jsonrows import encode_ndjson

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["JsonlConfig", "JsonlEncoder"]

ZSTD_HINT = "pip install 'hypaware[zstd]'"


class _Compressor:
    """A streaming compressor: `compress(data)` returns everything `data` compressed to
    (the codec's buffer is flushed each time, so sizes are exact for rollover and
    bytes leave as they are made), `finish()` ends the stream."""

    def __init__(self, compress: Callable[[bytes], bytes], finish: Callable[[], bytes]) -> None:
        self.compress = compress
        self.finish = finish


def _identity() -> _Compressor:
    return _Compressor(lambda data: data, lambda: b"")


def _gzip(level: int | None) -> _Compressor:
    # wbits=31: a gzip member, readable by gzip, zcat and pandas.
    obj = zlib.compressobj(6 if level is None else level, zlib.DEFLATED, 31)

    def compress(data: bytes) -> bytes:
        return obj.compress(data) + obj.flush(zlib.Z_SYNC_FLUSH)

    return _Compressor(compress, obj.flush)


def _zstd(level: int | None) -> _Compressor:
    import zstandard

    obj = zstandard.ZstdCompressor(level=3 if level is None else level).compressobj()

    def compress(data: bytes) -> bytes:
        return obj.compress(data) + obj.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)

    return _Compressor(compress, obj.flush)


class JsonlEncoder:
    """Encodes record batches as JSON Lines files. See `JsonlConfig` for the settings."""

    media_type = "application/x-ndjson"

    def __init__(self, config: JsonlConfig | None = None) -> None:
        self.config = config or JsonlConfig()
        if self.config.compression == "zstd":
            try:
                import zstandard  # noqa: F401
            except ImportError as exc:
                raise ConfigError.single(
                    "compression", f'compression "zstd" needs the zstandard package: {ZSTD_HINT}'
                ) from exc
        level = self.config.compression_level
        if level is not None:
            # Fail at build time, not on the first export.
            self._compressor().compress(b"")

    @property
    def extension(self) -> str:
        return {"none": "jsonl", "gzip": "jsonl.gz", "zstd": "jsonl.zst"}[self.config.compression]

    def _compressor(self) -> _Compressor:
        cfg = self.config
        try:
            if cfg.compression == "gzip":
                return _gzip(cfg.compression_level)
            if cfg.compression == "zstd":
                return _zstd(cfg.compression_level)
        except (ValueError, zlib.error) as exc:
            raise ConfigError.single(
                "compression_level",
                f"{cfg.compression_level} is not a valid {cfg.compression} level: {exc}",
            ) from exc
        return _identity()

    def encode(
        self, schema: pa.Schema, batches: Iterable[pa.RecordBatch]
    ) -> Iterator[Iterator[bytes]]:
        return files(BatchSource(schema, batches), self._write_file)

    def _write_file(self, source: BatchSource) -> Iterator[bytes]:
        cfg = self.config
        comp = self._compressor()
        size = 0
        while (batch := source.next()) is not None:
            step = cfg.lines_per_chunk
            for start in range(0, batch.num_rows, step):
                out = comp.compress(encode_ndjson(batch.slice(start, step)))
                if out:
                    size += len(out)
                    yield out
                if size >= cfg.target_file_size:
                    rest = batch.slice(start + step)
                    if rest.num_rows:
                        source.push_back(rest)
                    tail = comp.finish()
                    if tail:
                        yield tail
                    return
        tail = comp.finish()
        if tail:
            yield tail

    def __repr__(self) -> str:
        return f"JsonlEncoder(compression={self.config.compression!r})"
