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
    from .config import CacheConfig, HypawareConfig, SinkSpec, dump_config, load_config
    from .contracts import BlobStore, Encoder, Flushable, QueryableSink, Sink, TableFormat
    from .manifest import PluginManifest
    from .registry import Registry
    from .resolver import BuildContext, Component, SinkPlan, build, resolve
    from .secrets import Secret
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
    "CacheConfig",
    "CacheError",
    "Component",
    "ConfigError",
    "DatasetInfo",
    "EncodeError",
    "Encoder",
    "ExportBatch",
    "ExportOptions",
    "ExportResult",
    "Flushable",
    "HypawareConfig",
    "HypawareError",
    "NotFoundError",
    "ObjectMeta",
    "PartitionRef",
    "PathError",
    "PermissionDeniedError",
    "PluginError",
    "PluginManifest",
    "Problem",
    "QueryableSink",
    "Registry",
    "RetryPartition",
    "Secret",
    "Sink",
    "SinkClosedError",
    "SinkError",
    "SinkPlan",
    "SinkSpec",
    "StateError",
    "StoreError",
    "TableFormat",
    "TransientStoreError",
    "__version__",
    "build",
    "dump_config",
    "load_config",
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
