"""Manifests and config classes of the example plugins. Light: no pyarrow, no sqlite3."""

from __future__ import annotations

from typing import Any

import attrs

from hypaware import PluginManifest
from hypaware.plugin import BLOB_STORE, QUERYABLE, FieldValueError, positive

__all__ = ["ARROW_IPC", "SQLITE", "ArrowIpcConfig", "SqliteConfig"]


@attrs.frozen
class SqliteConfig:
    """Config of ``@acme/sqlite``.

    - `path` (str, default ``"acme.db"``): the database file; a relative path
      is taken from the config file's directory. Created on first export.
    - `table_prefix` (str, default ``""``): put before each dataset's name to
      make its table's name.
    - `busy_timeout` (number > 0, default ``5``): seconds to wait for another
      writer's lock before the partition is sent back for retry.
    """

    path: str = "acme.db"
    table_prefix: str = ""
    busy_timeout: float = attrs.field(default=5.0, validator=positive)


_COMPRESSIONS = (None, "lz4", "zstd")


def _compression(_inst: object, attribute: attrs.Attribute[Any], value: str | None) -> None:
    if value not in _COMPRESSIONS:
        raise FieldValueError(attribute.name, f"must be null, 'lz4' or 'zstd', got {value!r}")


@attrs.frozen
class ArrowIpcConfig:
    """Config of ``@acme/arrow-ipc``.

    - `compression` (``null``, ``"lz4"`` or ``"zstd"``, default ``null``):
      compression of the record batch buffers.
    - `max_file_bytes` (int > 0, default 134217728 = 128 MiB): a file is
      finished, and the next begun, once it reaches this size.
    """

    compression: str | None = attrs.field(default=None, validator=_compression)
    max_file_bytes: int = attrs.field(default=128 * 1024 * 1024, validator=positive)


SQLITE = PluginManifest(
    name="@acme/sqlite",
    kind="sink",
    factory="hypaware_example_sqlite.sqlite_sink:make_sink",
    supports={QUERYABLE},
    config_class=SqliteConfig,
    description=(
        "Append exported rows to a SQLite database, exactly once per partition; queryable."
    ),
)

ARROW_IPC = PluginManifest(
    name="@acme/arrow-ipc",
    kind="encoder",
    requires={BLOB_STORE},
    factory="hypaware_example_sqlite.arrow_ipc:make_encoder",
    config_class=ArrowIpcConfig,
    description="Write blob-sink files in the Arrow IPC file format (.arrow).",
)
