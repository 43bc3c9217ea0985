"""The ``engine: "fastparquet"`` writer of `ParquetEncoder`.

fastparquet writes from pandas, one row group per data frame, so each row
group is converted from Arrow on its own and the file is assembled here
(header, row groups, footer) to keep the encoder streaming. It writes flat
columns only: integers, floats, booleans, strings, binary and timestamps.
"""

from __future__ import annotations

import struct
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from hypaware.core.errors import ConfigError, EncodeError
from hypaware.encoding._stream import BatchSource, ChunkSink, row_groups

if TYPE_CHECKING:
    from hypaware.encoding.config import ParquetConfig

__all__ = ["FastparquetFile", "check_available"]

_MAGIC = b"PAR1"
# fastparquet passes "args" straight to its codec functions, which name the level differently.
_LEVEL_ARG = {"gzip": "compresslevel", "zstd": "level", "brotli": "level"}
INSTALL_HINT = "pip install 'hypaware[fastparquet]'"


def check_available() -> None:
    """Raise `ConfigError` with an install hint when fastparquet is missing."""
    try:
        import fastparquet  # noqa: F401
    except ImportError as exc:
        raise ConfigError.single(
            "engine",
            f'engine "fastparquet" needs the fastparquet package: {INSTALL_HINT}',
        ) from exc


def _check_flat(schema: pa.Schema) -> dict[str, str]:
    """Object encodings per column; `EncodeError` for a type fastparquet cannot write."""
    import pyarrow.types as t

    encodings: dict[str, str] = {}
    for field in schema:
        typ = field.type
        if t.is_string(typ) or t.is_large_string(typ):
            encodings[field.name] = "utf8"
        elif t.is_binary(typ) or t.is_large_binary(typ):
            encodings[field.name] = "bytes"
        elif not (
            t.is_integer(typ) or t.is_floating(typ) or t.is_boolean(typ) or t.is_timestamp(typ)
        ):
            raise EncodeError(
                f'engine "fastparquet" cannot write column {field.name!r} of type {typ}; '
                'use engine "pyarrow" (the default) for nested, date and decimal columns'
            )
    return encodings


def _pandas_type(typ: pa.DataType) -> Any:
    import pandas as pd  # type: ignore[import-untyped,unused-ignore]

    # Nullable pandas dtypes keep integers integers when they hold nulls.
    mapping: dict[pa.DataType, Any] = {
        pa.int8(): pd.Int8Dtype(),
        pa.int16(): pd.Int16Dtype(),
        pa.int32(): pd.Int32Dtype(),
        pa.int64(): pd.Int64Dtype(),
        pa.uint8(): pd.UInt8Dtype(),
        pa.uint16(): pd.UInt16Dtype(),
        pa.uint32(): pd.UInt32Dtype(),
        pa.uint64(): pd.UInt64Dtype(),
        pa.bool_(): pd.BooleanDtype(),
    }
    return mapping.get(typ)


class FastparquetFile:
    """Writes one Parquet file per call of `write`, from a shared batch source."""

    def __init__(self, schema: pa.Schema, config: ParquetConfig) -> None:
        self.schema = schema
        self.config = config
        self.encodings = _check_flat(schema)
        level = config.compression_level
        codec = "UNCOMPRESSED" if config.compression == "none" else config.compression.upper()
        self.compression: Any = codec
        if level is not None:
            arg = _LEVEL_ARG.get(config.compression)
            if arg is None:
                raise ConfigError.single(
                    "compression_level",
                    f'engine "fastparquet" takes no level for compression {config.compression!r}',
                )
            self.compression = {"_default": {"type": codec, "args": {arg: level}}}

    def _frame(self, table: pa.Table) -> Any:
        return table.to_pandas(
            types_mapper=_pandas_type, coerce_temporal_nanoseconds=True, split_blocks=True
        )

    def write(self, source: BatchSource) -> Iterator[bytes]:
        from fastparquet import writer as fpw

        cfg = self.config
        sink = ChunkSink()
        sink.write(_MAGIC)
        yield from sink.take()
        fmd: Any = None
        row_groups_written: list[Any] = []

        def flush(group: list[pa.RecordBatch]) -> None:
            nonlocal fmd
            frame = self._frame(pa.Table.from_batches(group, self.schema))
            try:
                with warnings.catch_warnings():
                    # fastparquet reads zoned timestamps through a pandas API that
                    # pandas now deprecates; the values it gets are the UTC ones.
                    warnings.simplefilter("ignore", DeprecationWarning)
                    if fmd is None:
                        fmd = fpw.make_metadata(
                            frame, has_nulls=True, object_encoding=self.encodings, times="int64"
                        )
                    rg = fpw.make_row_group(
                        sink, frame, fmd.schema, compression=self.compression, stats=cfg.statistics
                    )
            except (ValueError, TypeError, RuntimeError) as exc:
                raise EncodeError(f"fastparquet cannot write these rows: {exc}") from exc
            if rg is not None:
                row_groups_written.append(rg)

        groups = row_groups(source, max_rows=cfg.row_group_size, max_bytes=cfg.row_group_bytes)
        for group in groups:
            flush(group)
            del group  # not kept while the next group is gathered
            yield from sink.take()
            if sink.size >= cfg.target_file_size:
                groups.close()  # the rest goes back to the source for the next file
                break
        yield self._footer(fmd, row_groups_written)

    @staticmethod
    def _footer(fmd: Any, row_groups: list[Any]) -> bytes:
        # The thrift object hands out a copy of its list: assign, do not append.
        fmd.row_groups = row_groups
        fmd.num_rows = sum(rg.num_rows for rg in row_groups)
        body = bytes(fmd.to_bytes())
        return body + struct.pack("<I", len(body)) + _MAGIC
