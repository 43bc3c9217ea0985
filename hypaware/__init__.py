"""hypaware: export captured data from a local cache into durable sinks.

Importing this package is cheap: public names load their modules on first
use, and heavy dependencies (pyarrow, obstore, httpx, pyiceberg) load only
when a plugin that needs them is built.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import (
    AlreadyExistsError,
    CacheError,
    ConfigError,
    EncodeError,
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
    from .cache import Cache
    from .config import CacheConfig, HypawareConfig, SinkSpec, dump_config, load_config
    from .contracts import BlobStore, Encoder, Flushable, QueryableSink, Sink, TableFormat
    from .driver import ExportDriver, RunReport, SinkReport
    from .local_cache import LocalCache
    from .manifest import PluginManifest
    from .observe import CountingObserver, ExportObserver
    from .query_errors import (
        CacheOnlyWarning,
        NotQueryableError,
        QueryError,
        QueryInputError,
        SourceUnreadableError,
        UnknownDatasetError,
    )
    from .querying import query, query_async
    from .registry import Registry
    from .resolver import BuildContext, Component, SinkPlan, build, resolve
    from .secrets import Secret
    from .state import ProgressStore
    from .types import (
        DatasetInfo,
        ExportBatch,
        ExportOptions,
        ExportResult,
        ObjectMeta,
        PartitionRef,
        RetryPartition,
    )

_LAZY: dict[str, str] = {
    "Cache": "cache",
    "LocalCache": "local_cache",
    "ExportDriver": "driver",
    "RunReport": "driver",
    "SinkReport": "driver",
    "CountingObserver": "observe",
    "ExportObserver": "observe",
    "ProgressStore": "state",
    "CacheConfig": "config",
    "HypawareConfig": "config",
    "SinkSpec": "config",
    "dump_config": "config",
    "load_config": "config",
    "BlobStore": "contracts",
    "Encoder": "contracts",
    "Flushable": "contracts",
    "QueryableSink": "contracts",
    "Sink": "contracts",
    "TableFormat": "contracts",
    "PluginManifest": "manifest",
    "query": "querying",
    "query_async": "querying",
    "CacheOnlyWarning": "query_errors",
    "NotQueryableError": "query_errors",
    "QueryError": "query_errors",
    "QueryInputError": "query_errors",
    "SourceUnreadableError": "query_errors",
    "UnknownDatasetError": "query_errors",
    "Registry": "registry",
    "BuildContext": "resolver",
    "Component": "resolver",
    "SinkPlan": "resolver",
    "build": "resolver",
    "resolve": "resolver",
    "Secret": "secrets",
    "DatasetInfo": "types",
    "ExportBatch": "types",
    "ExportOptions": "types",
    "ExportResult": "types",
    "ObjectMeta": "types",
    "PartitionRef": "types",
    "RetryPartition": "types",
}

__all__ = [
    "AlreadyExistsError",
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
    "ExportObserver",
    "ExportOptions",
    "ExportResult",
    "Flushable",
    "HypawareConfig",
    "HypawareError",
    "LocalCache",
    "NotFoundError",
    "NotQueryableError",
    "ObjectMeta",
    "PartitionRef",
    "PathError",
    "PermissionDeniedError",
    "PluginError",
    "PluginManifest",
    "Problem",
    "ProgressStore",
    "QueryError",
    "QueryInputError",
    "QueryableSink",
    "Registry",
    "RetryPartition",
    "RunReport",
    "Secret",
    "Sink",
    "SinkClosedError",
    "SinkError",
    "SinkPlan",
    "SinkReport",
    "SinkSpec",
    "SourceUnreadableError",
    "StateError",
    "StoreError",
    "TableFormat",
    "TransientStoreError",
    "UnknownDatasetError",
    "__version__",
    "build",
    "dump_config",
    "load_config",
    "query",
    "query_async",
    "resolve",
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
