"""The encoders' config classes: how Parquet and JSON Lines files are written.

Light on purpose (no pyarrow): plugin manifests name these classes, and the
registry loads manifests to check configs without importing any encoder.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Literal

import attrs

from hypaware.core.config import FieldValueError, positive

__all__ = ["JsonlConfig", "ParquetConfig"]

MiB = 1024 * 1024

ParquetCompression = Literal["zstd", "snappy", "gzip", "brotli", "lz4", "none"]


@attrs.frozen
class ParquetConfig:
    """How Parquet files are written. Every key is optional.

    - `engine` (``"pyarrow"``, the default and only choice): the library that
      writes. The key stays so that configs naming it keep loading; a config
      asking for ``"fastparquet"`` is refused with the reason.
    - `compression` (``"zstd"`` | ``"snappy"`` | ``"gzip"`` | ``"brotli"`` |
      ``"lz4"`` | ``"none"``, default ``"zstd"``).
    - `compression_level` (int, default None: the codec's own default).
    - `row_group_size` (rows, default 131072): a row group is written when it
      holds this many rows ...
    - `row_group_bytes` (bytes, default 128 MiB): ... or this much Arrow data,
      whichever comes first. Memory while encoding is about one row group.
    - `target_file_size` (bytes, default 256 MiB): a file is closed after the
      row group that takes it to this size, and the next rows start a new file.
    - `dictionary` (bool, default true): dictionary-encode columns.
    - `dictionary_page_size` (bytes, default 512 KiB): how big a column's
      dictionary may grow in a row group; past it, the rest of that column
      chunk is written plain. Half of pyarrow's 1 MiB, which 131072 distinct
      8-byte values (ids, timestamps) fill exactly: at pyarrow's limit such a
      column keeps a useless dictionary, and its large hash table, for the
      whole row group.
    - `statistics` (bool, default true): write min/max/null-count statistics,
      which readers use to skip row groups.
    """

    engine: str = attrs.field(default="pyarrow", validator=lambda _i, _a, v: _check_engine(v))
    compression: ParquetCompression = "zstd"
    compression_level: int | None = None
    row_group_size: int = attrs.field(default=128 * 1024, validator=positive)
    row_group_bytes: int = attrs.field(default=128 * MiB, validator=positive)
    target_file_size: int = attrs.field(default=256 * MiB, validator=positive)
    dictionary: bool = True
    dictionary_page_size: int = attrs.field(default=512 * 1024, validator=positive)
    statistics: bool = True


def _check_engine(value: str) -> None:
    if value == "fastparquet":
        raise FieldValueError(
            "engine",
            'engine "fastparquet" is no longer offered: pyarrow writes every file '
            "fastparquet reads (fastparquet's public writer needs a whole data frame "
            'per file, which cannot stream); remove the key or set it to "pyarrow"',
        )
    if value != "pyarrow":
        raise FieldValueError("engine", f'must be "pyarrow", got {value!r}')


JsonlCompression = Literal["none", "gzip", "zstd"]


@attrs.frozen
class JsonlConfig:
    """How JSON Lines files are written. Every key is optional.

    - `compression` (``"none"`` | ``"gzip"`` | ``"zstd"``, default ``"none"``):
      files are named ``.jsonl``, ``.jsonl.gz`` or ``.jsonl.zst``. zstd needs
      ``pip install 'hypaware[zstd]'``.
    - `compression_level` (int, default None: gzip 6, zstd 3).
    - `target_file_size` (bytes as stored, default 256 MiB): a file is closed
      once it reaches this size and the next rows start a new file.
    - `lines_per_chunk` (rows, default 4096): how many rows are serialised at
      a time; bounds memory and the rollover overshoot.
    """

    compression: JsonlCompression = "none"
    compression_level: int | None = None
    target_file_size: int = attrs.field(default=256 * MiB, validator=positive)
    lines_per_chunk: int = attrs.field(default=4096, validator=positive)

    def required_modules(self) -> Iterator[tuple[str, str, str]]:
        """What the chosen options need installed, as (key, module, extra)."""
        if self.compression == "zstd":
            yield ("compression", "zstandard", "zstd")
