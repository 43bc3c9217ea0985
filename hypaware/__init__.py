"""hypaware: export captured data from a local cache into durable sinks.

Importing this package is cheap: public names load their modules on first
use, and heavy dependencies (pyarrow, obstore, httpx, pyiceberg) load only
when a plugin that needs them is built.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from hypaware._version import __version__
from hypaware.core.errors import (
    AlreadyExistsError,
    CacheError,
    ConfigError,
    EncodeError,
    FilterError,
    HypawareError,
    NotFoundError,
    PathError,
    PermissionDeniedError,
    PluginError,
    Problem,
    SinkClosedError,
    SinkError,
    StateError,
    StoreError,
    TransientStoreError,
)

if TYPE_CHECKING:
    from hypaware.cache.local import LocalCache
    from hypaware.cache.protocol import Cache
    from hypaware.core.config import CacheConfig, HypawareConfig, SinkSpec
    from hypaware.core.config_loader import dump_config, load_config
    from hypaware.core.contracts import (
        AsyncClosing,
        BlobStore,
        Encoder,
        Flushable,
        MaintainedSink,
        MaintainedTableFormat,
        ManagedSink,
        NamedStore,
        ObstoreBacked,
        QueryableSink,
        Sink,
        TableFormat,
        TableMaintenanceResult,
    )
    from hypaware.core.filter import Filter, col, parse_filter
    from hypaware.core.manifest import PluginManifest
    from hypaware.core.query_scope import QueryScope
    from hypaware.core.query_source import ProvidesQuerySource, QuerySource, SinkView
    from hypaware.core.redact import SecretRedactor, mask_secrets
    from hypaware.core.registry import Registry
    from hypaware.core.resolver import (
        BlobPlan,
        BuildContext,
        Component,
        RequestPlan,
        SinkPlan,
        resolve,
    )
    from hypaware.core.secrets import Secret
    from hypaware.core.types import (
        DatasetInfo,
        ExportBatch,
        ExportFloor,
        ExportOptions,
        ExportResult,
        MaintenanceReport,
        ObjectMeta,
        PartitionRef,
        RequestEvent,
        RetryPartition,
        writer_key,
    )
    from hypaware.export.build import build
    from hypaware.export.driver import ExportDriver
    from hypaware.export.observer import CountingObserver, ExportObserver
    from hypaware.export.once import export_once
    from hypaware.export.reports import RunReport, SinkReport
    from hypaware.export.state import ProgressStore
    from hypaware.querying.api import plan_query, query, query_async
    from hypaware.querying.errors import (
        CacheOnlyWarning,
        NotQueryableError,
        QueryError,
        QueryInputError,
        SourceUnreadableError,
        UnknownDatasetError,
    )
    from hypaware.querying.planner import QueryPlan

_LAZY: dict[str, str] = {
    "Cache": "cache.protocol",
    "LocalCache": "cache.local",
    "ExportDriver": "export.driver",
    "export_once": "export.once",
    "RunReport": "export.reports",
    "SinkReport": "export.reports",
    "CountingObserver": "export.observer",
    "ExportObserver": "export.observer",
    "ProgressStore": "export.state",
    "CacheConfig": "core.config",
    "HypawareConfig": "core.config",
    "SinkSpec": "core.config",
    "dump_config": "core.config_loader",
    "load_config": "core.config_loader",
    "AsyncClosing": "core.contracts",
    "BlobStore": "core.contracts",
    "ManagedSink": "core.contracts",
    "Encoder": "core.contracts",
    "Flushable": "core.contracts",
    "MaintainedSink": "core.contracts",
    "MaintainedTableFormat": "core.contracts",
    "TableMaintenanceResult": "core.contracts",
    "NamedStore": "core.contracts",
    "ObstoreBacked": "core.contracts",
    "QueryableSink": "core.contracts",
    "Sink": "core.contracts",
    "TableFormat": "core.contracts",
    "PluginManifest": "core.manifest",
    "QueryScope": "core.query_scope",
    "ProvidesQuerySource": "core.query_source",
    "QuerySource": "core.query_source",
    "SinkView": "core.query_source",
    "Filter": "core.filter",
    "col": "core.filter",
    "parse_filter": "core.filter",
    "query": "querying.api",
    "query_async": "querying.api",
    "CacheOnlyWarning": "querying.errors",
    "NotQueryableError": "querying.errors",
    "QueryError": "querying.errors",
    "QueryPlan": "querying.planner",
    "plan_query": "querying.api",
    "QueryInputError": "querying.errors",
    "SourceUnreadableError": "querying.errors",
    "UnknownDatasetError": "querying.errors",
    "Registry": "core.registry",
    "SecretRedactor": "core.redact",
    "mask_secrets": "core.redact",
    "BlobPlan": "core.resolver",
    "BuildContext": "core.resolver",
    "Component": "core.resolver",
    "RequestPlan": "core.resolver",
    "SinkPlan": "core.resolver",
    "build": "export.build",
    "resolve": "core.resolver",
    "Secret": "core.secrets",
    "DatasetInfo": "core.types",
    "ExportBatch": "core.types",
    "ExportFloor": "core.types",
    "ExportOptions": "core.types",
    "ExportResult": "core.types",
    "MaintenanceReport": "core.types",
    "ObjectMeta": "core.types",
    "PartitionRef": "core.types",
    "RequestEvent": "core.types",
    "RetryPartition": "core.types",
    "writer_key": "core.types",
}

__all__ = [
    "AlreadyExistsError",
    "AsyncClosing",
    "BlobPlan",
    "BlobStore",
    "BuildContext",
    "Cache",
    "CacheConfig",
    "CacheError",
    "CacheOnlyWarning",
    "Component",
    "ConfigError",
    "CountingObserver",
    "DatasetInfo",
    "EncodeError",
    "Encoder",
    "ExportBatch",
    "ExportDriver",
    "ExportFloor",
    "ExportObserver",
    "ExportOptions",
    "ExportResult",
    "Filter",
    "FilterError",
    "Flushable",
    "HypawareConfig",
    "HypawareError",
    "LocalCache",
    "MaintainedSink",
    "MaintainedTableFormat",
    "MaintenanceReport",
    "ManagedSink",
    "NamedStore",
    "NotFoundError",
    "NotQueryableError",
    "ObjectMeta",
    "ObstoreBacked",
    "PartitionRef",
    "PathError",
    "PermissionDeniedError",
    "PluginError",
    "PluginManifest",
    "Problem",
    "ProgressStore",
    "ProvidesQuerySource",
    "QueryError",
    "QueryInputError",
    "QueryPlan",
    "QueryScope",
    "QuerySource",
    "QueryableSink",
    "Registry",
    "RequestEvent",
    "RequestPlan",
    "RetryPartition",
    "RunReport",
    "Secret",
    "SecretRedactor",
    "Sink",
    "SinkClosedError",
    "SinkError",
    "SinkPlan",
    "SinkReport",
    "SinkSpec",
    "SinkView",
    "SourceUnreadableError",
    "StateError",
    "StoreError",
    "TableFormat",
    "TableMaintenanceResult",
    "TransientStoreError",
    "UnknownDatasetError",
    "__version__",
    "build",
    "col",
    "dump_config",
    "export_once",
    "load_config",
    "mask_secrets",
    "parse_filter",
    "plan_query",
    "query",
    "query_async",
    "resolve",
    "writer_key",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hypaware' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
