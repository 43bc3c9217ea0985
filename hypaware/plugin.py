"""The helpers a plugin author needs beyond `hypaware` itself.

A sink, encoder, destination or table format imports from three public
modules, and each name lives in exactly one of them:

- `hypaware`: the contracts (`Sink`, `Encoder`, `BlobStore`, `TableFormat`,
  `QueryableSink`, ...), the data types (`ExportBatch`, `ExportResult`,
  `RetryPartition`, `DatasetInfo`, ...), `SinkSpec`, `BuildContext`,
  `PluginManifest`, `Secret`, the errors and the filter language's entry
  points (`Filter`, `col`, `parse_filter`);
- `hypaware.plugin` (this module): config validators, manifest tags, path
  helpers, the filter tree's nodes and binders, and the helpers of a
  sink's own query source (`conform`, `filtered`, `restricted`, `acked`,
  `GenericSource`);
- `hypaware.testing.conformance`: the conformance suite.

Every other module is internal: it may change in any release without notice
(docs/writing-plugins.md, "Imports"). Names load on first use, so importing
this module is as cheap as importing `hypaware`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hypaware.core.config import SINK_SETTING_KEYS, FieldValueError, positive
    from hypaware.core.filter import (
        And,
        Col,
        Compare,
        IsIn,
        IsNull,
        Not,
        Op,
        Or,
        all_of,
        columns_of,
        parse_time,
    )
    from hypaware.core.filter_bind import bind_filter, to_arrow
    from hypaware.core.manifest import (
        BLOB_STORE,
        ENCODER,
        HTTP_ENDPOINT,
        QUERYABLE,
        SINK,
        TABLE_FORMAT,
        Capability,
        Feature,
        PluginKind,
    )
    from hypaware.core.paths import (
        MAX_PATH_BYTES,
        MAX_SEGMENT_BYTES,
        check_list_prefix,
        check_path,
        check_prefix,
        decode_segment,
        encode_segment,
        join_path,
    )
    from hypaware.core.query_source import (
        FloorReader,
        GenericSource,
        acked,
        conform,
        filtered,
        restricted,
    )

_LAZY: dict[str, str] = {
    "FieldValueError": "hypaware.core.config",
    "SINK_SETTING_KEYS": "hypaware.core.config",
    "positive": "hypaware.core.config",
    "And": "hypaware.core.filter",
    "Col": "hypaware.core.filter",
    "Compare": "hypaware.core.filter",
    "IsIn": "hypaware.core.filter",
    "IsNull": "hypaware.core.filter",
    "Not": "hypaware.core.filter",
    "Op": "hypaware.core.filter",
    "Or": "hypaware.core.filter",
    "all_of": "hypaware.core.filter",
    "columns_of": "hypaware.core.filter",
    "parse_time": "hypaware.core.filter",
    "bind_filter": "hypaware.core.filter_bind",
    "to_arrow": "hypaware.core.filter_bind",
    "BLOB_STORE": "hypaware.core.manifest",
    "ENCODER": "hypaware.core.manifest",
    "HTTP_ENDPOINT": "hypaware.core.manifest",
    "QUERYABLE": "hypaware.core.manifest",
    "SINK": "hypaware.core.manifest",
    "TABLE_FORMAT": "hypaware.core.manifest",
    "Capability": "hypaware.core.manifest",
    "Feature": "hypaware.core.manifest",
    "PluginKind": "hypaware.core.manifest",
    "MAX_PATH_BYTES": "hypaware.core.paths",
    "MAX_SEGMENT_BYTES": "hypaware.core.paths",
    "check_list_prefix": "hypaware.core.paths",
    "check_path": "hypaware.core.paths",
    "check_prefix": "hypaware.core.paths",
    "decode_segment": "hypaware.core.paths",
    "encode_segment": "hypaware.core.paths",
    "join_path": "hypaware.core.paths",
    "FloorReader": "hypaware.core.query_source",
    "GenericSource": "hypaware.core.query_source",
    "acked": "hypaware.core.query_source",
    "conform": "hypaware.core.query_source",
    "filtered": "hypaware.core.query_source",
    "restricted": "hypaware.core.query_source",
}

__all__ = [
    "BLOB_STORE",
    "ENCODER",
    "HTTP_ENDPOINT",
    "MAX_PATH_BYTES",
    "MAX_SEGMENT_BYTES",
    "QUERYABLE",
    "SINK",
    "SINK_SETTING_KEYS",
    "TABLE_FORMAT",
    "And",
    "Capability",
    "Col",
    "Compare",
    "Feature",
    "FieldValueError",
    "FloorReader",
    "GenericSource",
    "IsIn",
    "IsNull",
    "Not",
    "Op",
    "Or",
    "PluginKind",
    "acked",
    "all_of",
    "bind_filter",
    "check_list_prefix",
    "check_path",
    "check_prefix",
    "columns_of",
    "conform",
    "decode_segment",
    "encode_segment",
    "filtered",
    "join_path",
    "parse_time",
    "positive",
    "restricted",
    "to_arrow",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hypaware.plugin' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
