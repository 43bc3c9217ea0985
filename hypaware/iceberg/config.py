"""The ``@hypaware/format-iceberg`` config: where tables are registered and how they are written.

Light on purpose (no pyiceberg, no pyarrow): the plugin manifest names these
classes, and the registry loads manifests to check configs.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, Literal

import attrs

from hypaware.core.config import FieldValueError, positive
from hypaware.core.errors import ConfigError
from hypaware.core.schedule import check_schedule
from hypaware.core.secrets import Secret

if TYPE_CHECKING:
    from hypaware.core.resolver import BuildContext

__all__ = ["INSTALL_HINT", "CatalogConfig", "IcebergConfig", "MaintenanceConfig", "check_catalog"]

MiB = 1024 * 1024
INSTALL_HINT = "pip install 'hypaware[iceberg]'"

CatalogType = Literal["sqlite", "sql", "rest"]


def _not_negative(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    if value < 0:
        raise FieldValueError(attribute.name, f"must not be negative, got {value}")


def _namespace(_inst: object, attribute: attrs.Attribute[str], value: str) -> None:
    if not value or any(not part for part in value.split(".")):
        raise FieldValueError(
            attribute.name,
            f"must be a dotted namespace like 'hypaware' or 'analytics.raw', got {value!r}",
        )


def _cron(_inst: object, attribute: attrs.Attribute[str], value: str) -> None:
    problem = check_schedule(value)
    if problem is not None:
        raise FieldValueError(attribute.name, problem)


def _str_dict(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in dict(value).items()}


@attrs.frozen
class CatalogConfig:
    """Where tables are registered. Every key is optional.

    - `type` (``"sqlite"`` | ``"sql"`` | ``"rest"``, default ``"sqlite"``):
      ``sqlite`` is an embedded SQL catalog in one file; ``sql`` is any
      SQLAlchemy database URL (PostgreSQL for writers on many machines);
      ``rest`` is an Iceberg REST catalog.
    - `path` (str, default ``<state dir>/sinks/<sink>/iceberg-catalog.db``):
      the sqlite file (``sqlite`` only). Several processes on one machine
      share a table by naming the same file.
    - `uri` (str, no default): the SQLAlchemy URL (``sql``) or the REST
      endpoint (``rest``), e.g. ``"postgresql+psycopg://hyp@db/iceberg"``.
    - `password` (`Secret`, default none): the database password (``sql``),
      put into the URL when connecting; keep it out of `uri`.
    - `credential` (`Secret`, default none): REST OAuth2 client credentials,
      ``"client_id:client_secret"``.
    - `token` (`Secret`, default none): a REST bearer token.
    - `warehouse` (str, default none): the REST catalog's warehouse name.
      For ``sqlite``/``sql`` tables are always placed under the sink's
      destination, so this key is refused there.
    - `lock_timeout` (seconds, default 30): how long a ``sqlite`` writer waits
      for another writer's lock before the batch is retried later.
    - `name` (str, default ``"hypaware"``): the catalog's name; writers that
      share a SQL database must use the same one.
    - `properties` (object of strings, default empty): extra pyiceberg
      catalog properties (e.g. ``"scope"`` for REST).
    """

    type: CatalogType = "sqlite"
    path: str | None = None
    uri: str | None = None
    password: Secret | None = None
    credential: Secret | None = None
    token: Secret | None = None
    warehouse: str | None = None
    lock_timeout: float = attrs.field(default=30.0, validator=positive)
    name: str = "hypaware"
    properties: dict[str, str] = attrs.field(factory=dict, converter=_str_dict)


@attrs.frozen
class MaintenanceConfig:
    """How a sink keeps its tables healthy as they grow. Every key is optional.

    A table that gains a small snapshot every few minutes would otherwise
    pay for its whole history on every commit. The driver runs maintenance
    on its own `schedule`; ``hypaware maintain`` runs it at once.

    - `enabled` (bool, default true): false leaves the tables alone (the
      driver never runs it; ``hypaware maintain`` still does when asked).
    - `schedule` (5-field cron, UTC, default ``"0 * * * *"``, hourly): when
      the driver runs it, between passes.
    - `keep_snapshots` (int, default 10): the newest snapshots always kept.
    - `keep_for` (seconds, default 3600): snapshots younger than this are
      kept, and so are the files they read: a query planned against one
      may still be reading. Files a crashed compaction left are removed once
      older than this (and at least an hour old).
    - `compact` (bool, default true): rewrite a closed day's small data
      files into files of `target_file_size`, sorted by lookup key and time.
    - `compact_after` (seconds, default 3600): how long after a day ends
      (by the driver's clock) it counts as closed; late rows after that are
      compacted at the next run.
    - `merge_manifests_at` (int, default 16): commits merge a table's
      manifests once it has this many (Iceberg's
      ``commit.manifest.min-count-to-merge``; set on tables that do not
      name their own).
    """

    enabled: bool = True
    schedule: str = attrs.field(default="0 * * * *", validator=_cron)
    keep_snapshots: int = attrs.field(default=10, validator=positive)
    keep_for: float = attrs.field(default=3600.0, validator=_not_negative)
    compact: bool = True
    compact_after: float = attrs.field(default=3600.0, validator=_not_negative)
    merge_manifests_at: int = attrs.field(default=16, validator=positive)


@attrs.frozen
class IcebergConfig:
    """How datasets become Iceberg tables. Every key is optional.

    - `catalog` (object, default the embedded sqlite catalog): see
      `CatalogConfig`.
    - `namespace` (str, default ``"hypaware"``): the catalog namespace
      tables are registered in; dots nest (``"analytics.raw"``). A dataset's
      table is named after the dataset.
    - `target_file_size` (bytes, default 256 MiB): a day's rows roll over to
      a new data file past this size. The Parquet encoder reads the same key.
    - `commit_retries` (int, default 10): how many more times a commit that
      lost a race with another writer is tried, on top of pyiceberg's own
      retries, before the batch goes back for retry.
    - `commit_backoff` (seconds, default 0.1): the first wait between those
      attempts; it doubles up to 5 s, with jitter.
    - `maintenance` (object, default on): snapshot expiry, manifest merging
      and compaction; see `MaintenanceConfig`.
    """

    catalog: CatalogConfig = attrs.field(factory=CatalogConfig)
    namespace: str = attrs.field(default="hypaware", validator=_namespace)
    target_file_size: int = attrs.field(default=256 * MiB, validator=positive)
    commit_retries: int = attrs.field(default=10, validator=_not_negative)
    commit_backoff: float = attrs.field(default=0.1, validator=positive)
    maintenance: MaintenanceConfig = attrs.field(factory=MaintenanceConfig)

    def required_modules(self) -> Iterator[tuple[str, str, str]]:
        """What an Iceberg sink needs installed, as (key, module, extra)."""
        yield ("", "pyiceberg", "iceberg")


def check_catalog(config: IcebergConfig, ctx: BuildContext) -> None:
    cat = config.catalog
    base = f"sinks.{ctx.sink_name}.config.catalog"
    if cat.type in ("sql", "rest") and not cat.uri:
        raise ConfigError.single(f"{base}.uri", f"a {cat.type} catalog needs 'uri'")
    if cat.type != "sqlite" and cat.path is not None:
        raise ConfigError.single(f"{base}.path", "'path' is for the sqlite catalog only")
    if cat.type == "sqlite" and cat.uri is not None:
        raise ConfigError.single(
            f"{base}.uri", "the sqlite catalog takes 'path'; use type 'sql' for a database URL"
        )
    if cat.type != "rest":
        for key, value in (
            ("credential", cat.credential),
            ("token", cat.token),
            ("warehouse", cat.warehouse),
        ):
            if value is not None:
                raise ConfigError.single(f"{base}.{key}", f"'{key}' is for the rest catalog only")
    if cat.type != "sql" and cat.password is not None:
        raise ConfigError.single(f"{base}.password", "'password' is for the sql catalog only")
