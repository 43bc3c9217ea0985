"""``@hypaware/format-iceberg``: Apache Iceberg tables, one per dataset, on any blob store.

This module is light (no pyiceberg, no pyarrow at import); the table format
lives in `hypaware.iceberg` and is imported by the factory, so the
``hypaware[iceberg]`` extra is needed only when such a sink is built.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hypaware.core.errors import ConfigError, PluginError
from hypaware.core.manifest import BLOB_STORE, ENCODER, QUERYABLE, PluginManifest
from hypaware.iceberg.config import INSTALL_HINT, CatalogConfig, IcebergConfig, check_catalog

if TYPE_CHECKING:
    from hypaware.core.contracts import BlobStore, Encoder
    from hypaware.core.resolver import BuildContext
    from hypaware.iceberg.table_format import IcebergTableFormat

__all__ = ["MANIFEST", "CatalogConfig", "IcebergConfig", "create"]


def create(
    config: IcebergConfig | None,
    ctx: BuildContext,
    *,
    store: BlobStore,
    encoder: Encoder,
) -> IcebergTableFormat:
    """Factory: the Iceberg table format writing through `store` with `encoder`.

    Opens nothing yet: the catalog is reached on the first export or scan, so
    an unreachable catalog is reported per batch, not at start-up.
    """
    config = config or IcebergConfig()
    check_catalog(config, ctx)
    from hypaware.encoding.parquet import ParquetEncoder

    # Iceberg needs the field ids that only our pyarrow Parquet writer puts in its files.
    if not isinstance(encoder, ParquetEncoder):
        raise ConfigError.single(
            f"sinks.{ctx.sink_name}.encoder",
            f"@hypaware/format-iceberg writes Parquet data files with @hypaware/format-parquet; "
            f"encoder {type(encoder).__name__} makes {encoder.extension!r} files",
        )
    if encoder.config.engine != "pyarrow":
        raise ConfigError.single(
            f"sinks.{ctx.sink_name}.config.engine",
            f"@hypaware/format-iceberg needs the pyarrow Parquet engine (Iceberg field ids); "
            f"got {encoder.config.engine!r}",
        )
    try:
        from hypaware.iceberg.table_format import IcebergTableFormat
    except ImportError as exc:
        raise PluginError(
            f"sink {ctx.sink_name!r}: @hypaware/format-iceberg needs pyiceberg "
            f"({exc.name or exc}); install it with: {INSTALL_HINT}"
        ) from exc
    return IcebergTableFormat(config, ctx, store=store, encoder=encoder)


MANIFEST = PluginManifest(
    name="@hypaware/format-iceberg",
    kind="table-format",
    factory="hypaware.plugins.format_iceberg:create",
    requires={BLOB_STORE, ENCODER},
    supports={QUERYABLE},
    config_class=IcebergConfig,
    encoders=("@hypaware/format-parquet",),
    description="Apache Iceberg tables (day-partitioned, sorted by lookup key), queryable",
)
