"""Opening the configured catalog and finding or registering a dataset's table.

Catalog properties always route file access through `ObstoreFileIO`, so
metadata, manifests and data files all go through the sink's destination.
Backend errors are turned into `IcebergError` naming the sink, dataset and
table; whether an error is worth retrying is kept on the error.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import (
    CommitFailedException,
    NamespaceAlreadyExistsError,
    NoSuchTableError,
    TableAlreadyExistsError,
)
from pyiceberg.io import PY_IO_IMPL
from pyiceberg.table import Table
from pyiceberg.table.metadata import TableMetadata
from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt

from hypaware.core.errors import ConfigError, SinkError
from hypaware.iceberg.fileio import IO_IMPL, TOKEN_PROPERTY

if TYPE_CHECKING:
    from hypaware.core.resolver import BuildContext
    from hypaware.iceberg.config import CatalogConfig

__all__ = [
    "IcebergError",
    "open_catalog",
    "retry_cause",
    "retrying",
    "table_identifier",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

SQLITE_FILE = "iceberg-catalog.db"


class IcebergError(SinkError):
    """An Iceberg catalog or table operation failed; `retryable`: whether a later try can help."""

    def __init__(self, message: str, *, retryable: bool = True) -> None:
        super().__init__(message)
        self.retryable = retryable


def table_identifier(namespace: str, dataset: str) -> tuple[str, ...]:
    """The table of a dataset: the namespace's levels, then the dataset name.

    Characters other than letters, digits and ``_`` become ``_`` so that every
    engine accepts the name unquoted.
    """
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in dataset)
    return (*namespace.split("."), name)


def catalog_properties(
    config: CatalogConfig, ctx: BuildContext, *, token: str, warehouse_url: str
) -> dict[str, str]:
    """The pyiceberg properties for the configured catalog (secrets revealed here)."""
    props: dict[str, str] = dict(config.properties)
    props[PY_IO_IMPL] = IO_IMPL
    props[TOKEN_PROPERTY] = token
    if config.type == "sqlite":
        path = (
            ctx.resolve_path(config.path)
            if config.path is not None
            else ctx.state_dir / SQLITE_FILE
        )
        props["uri"] = f"sqlite:///{path}?timeout={config.lock_timeout:g}"
        props["warehouse"] = warehouse_url
    elif config.type == "sql":
        assert config.uri is not None
        uri = config.uri
        password = ctx.reveal(config.password, "catalog.password")
        if password is not None:
            from sqlalchemy.engine import make_url

            uri = make_url(uri).set(password=password).render_as_string(hide_password=False)
        props["uri"] = uri
        props["warehouse"] = warehouse_url
    else:
        assert config.uri is not None
        props["uri"] = config.uri
        credential = ctx.reveal(config.credential, "catalog.credential")
        token_value = ctx.reveal(config.token, "catalog.token")
        if credential is not None:
            props["credential"] = credential
        if token_value is not None:
            props["token"] = token_value
        if config.warehouse is not None:
            props["warehouse"] = config.warehouse
    return props


def describe_catalog(config: CatalogConfig, ctx: BuildContext) -> str:
    """The catalog in words for messages, without secrets."""
    if config.type == "sqlite":
        path = (
            ctx.resolve_path(config.path)
            if config.path is not None
            else ctx.state_dir / SQLITE_FILE
        )
        return f"sqlite catalog {str(path)!r}"
    if config.type == "sql":
        from sqlalchemy.engine import make_url

        assert config.uri is not None
        try:
            shown = make_url(config.uri).render_as_string(hide_password=True)
        except Exception:
            shown = "<unparsable URL>"
        return f"sql catalog {shown!r}"
    return f"rest catalog {config.uri!r}"


def open_catalog(config: CatalogConfig, ctx: BuildContext, properties: dict[str, str]) -> Catalog:
    """Connect to the catalog; `IcebergError` (retryable) if it cannot be reached."""
    where = describe_catalog(config, ctx)
    try:
        if config.type == "rest":
            from pyiceberg.catalog.rest import RestCatalog

            return RestCatalog(config.name, **properties)
        if config.type == "sqlite":
            sqlite_dir = (
                ctx.resolve_path(config.path).parent if config.path is not None else ctx.state_dir
            )
            Path(sqlite_dir).mkdir(parents=True, exist_ok=True)
        sql_catalog = _disposing_sql_catalog()
        # Creating the catalog's own tables races with other writers starting at once.
        return retrying(
            lambda: sql_catalog(config.name, **properties),
            retry_on=_is_setup_race,
            attempts=5,
            backoff=0.05,
        )
    except ImportError as exc:
        raise ConfigError.single(
            f"sinks.{ctx.sink_name}.config.catalog.type",
            f"the {config.type} catalog needs a driver that is not installed ({exc.name or exc}); "
            "install it with: pip install 'hypaware[iceberg]' and the database's driver",
        ) from exc
    except Exception as exc:
        raise IcebergError(f"{where}: cannot open the catalog: {_brief(exc)}") from exc


def _disposing_sql_catalog() -> type[Catalog]:
    """pyiceberg's `SqlCatalog`, made to dispose its engine when creating its tables fails.

    `SqlCatalog.__init__` creates an engine, then the catalog's tables; when
    the latter fails (another writer won the race) the half-made catalog is
    never returned, and its pooled sqlite connections would be left to the
    garbage collector.
    """
    from pyiceberg.catalog.sql import IcebergTables, SqlCatalog
    from pyiceberg.table import CommitTableResponse
    from pyiceberg.table.update import TableRequirement, TableUpdate

    class DisposingSqlCatalog(SqlCatalog):
        def __init__(self, name: str, **properties: str) -> None:
            self._parsed = ParsedMetadata()
            super().__init__(name, **properties)

        def create_tables(self) -> None:
            try:
                super().create_tables()
            except BaseException:
                self.engine.dispose()
                raise

        def _convert_orm_to_iceberg(self, orm_table: IcebergTables) -> Table:
            location = orm_table.metadata_location
            metadata = self._parsed.get(location)
            if metadata is None or not orm_table.table_namespace or not orm_table.table_name:
                table = super()._convert_orm_to_iceberg(orm_table)
                self._parsed.put(table.metadata_location, table.metadata)
                return table
            assert location is not None  # a parsed entry has a location
            return Table(
                identifier=(
                    *Catalog.identifier_to_tuple(orm_table.table_namespace),
                    orm_table.table_name,
                ),
                metadata=metadata,
                metadata_location=location,
                io=self._load_file_io(metadata.properties, location),
                catalog=self,
            )

        def commit_table(
            self,
            table: Table,
            requirements: tuple[TableRequirement, ...],
            updates: tuple[TableUpdate, ...],
        ) -> CommitTableResponse:
            response = super().commit_table(table, requirements, updates)
            self._parsed.put(response.metadata_location, response.metadata)
            return response

    return DisposingSqlCatalog


class ParsedMetadata:
    """Table metadata already parsed, by the location of its file.

    A metadata file is never rewritten in place (every commit writes a new
    one and moves the catalog's pointer), so what was parsed from a location,
    or committed to it, is what that location holds for good. The catalog row
    is still read on every load: only the parse of a file already seen is
    saved, which was most of the cost of a load, and a pass loads a table
    three times (the pass, the refresh before its commit, the commit's check).
    """

    # A few tables a sink writes, each wanting its newest version or two.
    LIMIT = 16

    def __init__(self) -> None:
        self._entries: dict[str, TableMetadata] = {}
        self._lock = threading.Lock()

    def get(self, location: str | None) -> TableMetadata | None:
        if location is None:
            return None
        with self._lock:
            return self._entries.get(location)

    def put(self, location: str | None, metadata: TableMetadata) -> None:
        if location is None:
            return
        with self._lock:
            self._entries.pop(location, None)
            self._entries[location] = metadata
            while len(self._entries) > self.LIMIT:
                del self._entries[next(iter(self._entries))]


def _is_lock_error(exc: BaseException) -> bool:
    text = str(exc).lower()
    return "database is locked" in text or "database table is locked" in text


def _is_setup_race(exc: BaseException) -> bool:
    # Two writers opening a fresh catalog both see no tables; the loser's
    # CREATE TABLE fails, and its retry finds the winner's tables.
    return _is_lock_error(exc) or "already exists" in str(exc).lower()


def is_conflict(exc: BaseException) -> bool:
    """A lost race with another writer: worth another attempt on fresh metadata."""
    return isinstance(exc, CommitFailedException) or _is_lock_error(exc)


RetryWait = Callable[[str, float], None]
"""Told before each wait: the cause (`retry_cause`) and the seconds about to be waited."""


def retry_cause(exc: BaseException) -> str:
    """A short, stable name for why an attempt is retried (a metric label, not a message)."""
    if isinstance(exc, CommitFailedException):
        return "commit-conflict"
    if _is_lock_error(exc):
        return "catalog-locked"
    if "already exists" in str(exc).lower():
        return "setup-race"
    return type(exc).__name__


def retrying(
    fn: Callable[[], T],
    *,
    retry_on: Callable[[BaseException], bool],
    attempts: int,
    backoff: float,
    sleep: Callable[[float], None] = time.sleep,
    on_wait: RetryWait | None = None,
) -> T:
    """`fn()`, tried up to `attempts` more times while it fails with an error `retry_on` accepts.

    Waits `backoff` seconds, doubling up to 5 s, each with up to 50% jitter so
    that writers that collided do not collide again in step. `on_wait` hears
    of every wait before it is taken; the last error is raised as it came.
    """

    def wait(state: RetryCallState) -> float:
        base: float = min(backoff * 2.0 ** (state.attempt_number - 1), 5.0)
        return base * (1 + random.random() / 2)

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        seconds = float(state.next_action.sleep) if state.next_action is not None else 0.0
        log.debug(
            "retrying after %s (attempt %d of %d, waiting %.3fs)",
            exc,
            state.attempt_number,
            attempts,
            seconds,
        )
        if on_wait is not None and exc is not None:
            on_wait(retry_cause(exc), seconds)

    return Retrying(
        retry=retry_if_exception(retry_on),
        stop=stop_after_attempt(attempts + 1),
        wait=wait,
        sleep=sleep,
        before_sleep=before_sleep,
        reraise=True,
    )(fn)


def ensure_namespace(catalog: Catalog, namespace: tuple[str, ...]) -> None:
    """Create the namespace (and its parents) if missing; another writer doing so is fine."""
    for depth in range(1, len(namespace) + 1):
        level = namespace[:depth]
        try:
            catalog.create_namespace_if_not_exists(level)
        except NamespaceAlreadyExistsError:
            pass
        except Exception:
            # Two writers creating it at once: the loser's insert fails on the key.
            if not catalog.namespace_exists(level):
                raise


def load_or_create(
    catalog: Catalog, identifier: tuple[str, ...], create: Callable[[], Table]
) -> tuple[Table, bool]:
    """The table, registering it with `create` if it does not exist (True if we did)."""
    try:
        return catalog.load_table(identifier), False
    except NoSuchTableError:
        pass
    ensure_namespace(catalog, identifier[:-1])
    try:
        return create(), True
    except TableAlreadyExistsError:
        # Another writer registered it first: use theirs.
        return catalog.load_table(identifier), False


def _brief(exc: BaseException) -> str:
    text = str(exc).split("\n", 1)[0].strip()
    if len(text) > 300:
        text = text[:300] + "..."
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
