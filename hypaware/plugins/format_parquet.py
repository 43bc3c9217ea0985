"""``@hypaware/format-parquet``: Parquet files, written with pyarrow.

This module is light (no pyarrow at import); the encoder lives in
`hypaware.encoding.parquet`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hypaware.core.manifest import BLOB_STORE, QUERYABLE, PluginManifest
from hypaware.encoding.config import ParquetConfig

if TYPE_CHECKING:
    from hypaware.core.resolver import BuildContext
    from hypaware.encoding.parquet import ParquetEncoder

__all__ = ["MANIFEST", "ParquetConfig", "create"]


def create(config: ParquetConfig | None, ctx: BuildContext | None = None) -> ParquetEncoder:
    """Factory: the encoder for `config` (defaults when None)."""
    from hypaware.encoding.parquet import ParquetEncoder

    return ParquetEncoder(config or ParquetConfig())


MANIFEST = PluginManifest(
    name="@hypaware/format-parquet",
    kind="encoder",
    factory="hypaware.plugins.format_parquet:create",
    requires={BLOB_STORE},
    supports={QUERYABLE},
    config_class=ParquetConfig,
    description="Parquet files (pyarrow), queryable in place",
)
