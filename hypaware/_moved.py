"""Forwarding for the module paths of the 0.1 layout (deprecated in 0.2.0, removed in 0.3.0).

0.2.0 moved modules into rooms by concept (``hypaware.config`` became
``hypaware.core.config``, and so on) and split ``hypaware.testing`` into the
conformance suite (``hypaware.testing.conformance``) and the loopback servers
(``hypaware.testing.servers``). Each old path is a small module whose
``__getattr__`` comes from `forward`: a name is looked up where it lives now,
with a `DeprecationWarning` naming that place, so a plugin (or its tests)
written against 0.1 keeps importing for one minor release. `MOVED` is the
whole table, keyed by the old path under ``hypaware.`` (``"config"``,
``"testing.central"``): the old module's public names (its ``__all__`` in
0.1) and each one's new home, the public module (`PUBLIC`) where there is one.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable
from typing import Any

__all__ = ["GONE", "MOVED", "PUBLIC", "forward", "names"]

REMOVED_IN = "0.3.0"

# The modules that hold still between releases (docs/writing-plugins.md, "Imports").
PUBLIC = ("hypaware", "hypaware.plugin", "hypaware.testing.conformance")

_SUITE = "hypaware.testing.conformance"

MOVED: dict[str, dict[str, str]] = {
    "backoff": {
        "AbortableSleep": "hypaware.request.backoff",
        "BackoffPolicy": "hypaware.request.backoff",
        "Backpressure": "hypaware.request.backoff",
        "BudgetExceededError": "hypaware.request.backoff",
        "BudgetStop": "hypaware.request.backoff",
        "DEFAULT_BUDGET": "hypaware.request.backoff",
        "DEFAULT_LADDER": "hypaware.request.backoff",
        "DEFAULT_MAX_ATTEMPTS": "hypaware.request.backoff",
        "LadderWait": "hypaware.request.backoff",
        "MAX_RETRY_AFTER": "hypaware.request.backoff",
        "Pacer": "hypaware.request.backoff",
        "WaitAbortedError": "hypaware.request.backoff",
        "WaitPlan": "hypaware.request.backoff",
        "parse_retry_after": "hypaware.request.backoff",
        "plan_waits": "hypaware.request.backoff",
        "retry_call": "hypaware.request.backoff",
    },
    "batch_index": {
        "BatchIndex": "hypaware.blob.batch_index",
        "BatchRecord": "hypaware.blob.batch_index",
        "INDEX_FILE": "hypaware.blob.batch_index",
        "KEEP_DAYS": "hypaware.blob.batch_index",
    },
    "blob_fs": {
        "BUCKET": "hypaware.blob.fs",
        "filesystem": "hypaware.blob.fs",
    },
    "blob_sink": {
        "BlobSink": "hypaware.blob.sink",
        "NULL_DAY": "hypaware.blob.object_names",
        "batch_stem": "hypaware.blob.object_names",
    },
    "blob_store": {
        "DEFAULT_CHUNK_SIZE": "hypaware.blob.store",
        "ObstoreBlobStore": "hypaware.blob.store",
        "describe_store_url": "hypaware.blob.store",
    },
    "cache": {
        "Cache": "hypaware",
        "ExportFloor": "hypaware.cache.protocol",
        "RetentionAware": "hypaware.cache.protocol",
        "RetentionReport": "hypaware.cache.protocol",
    },
    "cache_partitioning": {
        "GRAINS": "hypaware.cache.partitioning",
        "bucket_closed": "hypaware.cache.partitioning",
        "conform": "hypaware.cache.partitioning",
        "dump_info": "hypaware.cache.partitioning",
        "key_dir": "hypaware.cache.partitioning",
        "load_info": "hypaware.cache.partitioning",
        "split_by_key": "hypaware.cache.partitioning",
        "to_table": "hypaware.cache.partitioning",
    },
    "chunking": {
        "CODECS": "hypaware.request.chunking",
        "Chunk": "hypaware.request.chunking",
        "ChunkIdentity": "hypaware.request.chunking",
        "ChunkLimits": "hypaware.request.chunking",
        "ChunkTooLargeError": "hypaware.request.chunking",
        "Codec": "hypaware.request.chunking",
        "Framing": "hypaware.request.chunking",
        "chunk_batches": "hypaware.request.chunking",
        "chunk_id": "hypaware.request.chunking",
        "chunk_rows": "hypaware.request.chunking",
        "compress": "hypaware.request.chunking",
    },
    "config": {
        "CacheConfig": "hypaware",
        "DEFAULT_SCHEDULE": "hypaware.core.config",
        "FieldValueError": "hypaware.plugin",
        "HypawareConfig": "hypaware",
        "SinkSpec": "hypaware",
        "dump_config": "hypaware",
        "load_config": "hypaware",
        "make_converter": "hypaware.core.config_converter",
        "positive": "hypaware.plugin",
        "structure_config": "hypaware.core.config_converter",
    },
    "contracts": {
        "BlobStore": "hypaware",
        "Encoder": "hypaware",
        "Flushable": "hypaware",
        "QueryableSink": "hypaware",
        "Sink": "hypaware",
        "TableFormat": "hypaware",
    },
    "demo": {
        "DEMO_DATASET": "hypaware.cli.demo_cache",
        "DemoSeed": "hypaware.cli.demo_cache",
        "demo_config": "hypaware.cli.demo_cache",
        "demo_dataset_info": "hypaware.cli.demo_cache",
        "seed_demo_cache": "hypaware.cli.demo_cache",
    },
    "driver": {
        "Clock": "hypaware.export.slots",
        "ExportDriver": "hypaware",
        "RunReport": "hypaware",
        "SinkReport": "hypaware",
        "SystemClock": "hypaware.export.slots",
        "group_batches": "hypaware.export.runner",
        "next_slot": "hypaware.export.slots",
    },
    "endpoints": {
        "check_endpoint_url": "hypaware.request.endpoints",
        "is_loopback_host": "hypaware.destinations.remote",
        "safe_url": "hypaware.request.endpoints",
    },
    "errors": {
        "AlreadyExistsError": "hypaware",
        "CacheError": "hypaware",
        "ConfigError": "hypaware",
        "EncodeError": "hypaware",
        "HypawareError": "hypaware",
        "NotFoundError": "hypaware",
        "PathError": "hypaware",
        "PermissionDeniedError": "hypaware",
        "PluginError": "hypaware",
        "Problem": "hypaware",
        "SinkClosedError": "hypaware",
        "SinkError": "hypaware",
        "StateError": "hypaware",
        "StoreError": "hypaware",
        "TransientStoreError": "hypaware",
    },
    "jsonrows": {
        "batch_to_rows": "hypaware.encoding.jsonrows",
        "dumps_row": "hypaware.encoding.jsonrows",
        "encode_ndjson": "hypaware.encoding.jsonrows",
        "iter_ndjson": "hypaware.encoding.jsonrows",
        "iter_row_bytes": "hypaware.encoding.jsonrows",
    },
    "local_cache": {
        "LocalCache": "hypaware",
        "LocalCacheStats": "hypaware.cache.directory",
    },
    "manifest": {
        "BLOB_STORE": "hypaware.plugin",
        "CAPABILITY_FOR_KIND": "hypaware.core.manifest",
        "ENCODER": "hypaware.plugin",
        "HTTP_ENDPOINT": "hypaware.plugin",
        "PluginKind": "hypaware.plugin",
        "PluginManifest": "hypaware",
        "QUERYABLE": "hypaware.plugin",
        "SINK": "hypaware.plugin",
        "TABLE_FORMAT": "hypaware.plugin",
        "load_object": "hypaware.core.manifest",
    },
    "observe": {
        "CountingObserver": "hypaware",
        "ExportObserver": "hypaware",
        "NullObserver": "hypaware.export.observer",
        "SinkCounters": "hypaware.export.observer",
    },
    "paths": {
        "MAX_PATH_BYTES": "hypaware.plugin",
        "MAX_SEGMENT_BYTES": "hypaware.plugin",
        "check_list_prefix": "hypaware.plugin",
        "check_path": "hypaware.plugin",
        "check_prefix": "hypaware.plugin",
        "decode_segment": "hypaware.plugin",
        "encode_segment": "hypaware.plugin",
        "join_path": "hypaware.plugin",
    },
    "query_errors": {
        "CacheOnlyWarning": "hypaware",
        "NotQueryableError": "hypaware",
        "QueryError": "hypaware",
        "QueryInputError": "hypaware",
        "SourceUnreadableError": "hypaware",
        "UnknownDatasetError": "hypaware",
    },
    "query_sources": {
        "Filters": "hypaware.querying.filters",
        "GenericSource": "hypaware.plugin",
        "IcebergSource": "hypaware.iceberg.query_source",
        "ParquetSource": "hypaware.blob.query_source",
        "SinkView": "hypaware",
        "sink_source": "hypaware.querying.sources",
    },
    "querying": {
        "CacheOnlyWarning": "hypaware",
        "NotQueryableError": "hypaware",
        "QueryError": "hypaware",
        "QueryInputError": "hypaware",
        "QueryPlan": "hypaware",
        "SourceUnreadableError": "hypaware",
        "UnknownDatasetError": "hypaware",
        "plan_query": "hypaware",
        "query": "hypaware",
        "query_async": "hypaware",
    },
    "registry": {
        "ENTRY_POINT_GROUP": "hypaware.core.registry",
        "Registry": "hypaware",
        "did_you_mean": "hypaware.core.manifest",
    },
    "request_config": {
        "RequestSinkSettings": "hypaware.request.settings",
        "check_header_name": "hypaware.request.settings",
        "reveal_headers": "hypaware.request.settings",
    },
    "request_sink": {
        "RequestSink": "hypaware.request.sink",
        "Timeouts": "hypaware.request.sink",
    },
    "resolver": {
        "BuildContext": "hypaware",
        "Component": "hypaware",
        "SinkPlan": "hypaware",
        "build": "hypaware",
        "resolve": "hypaware",
    },
    "schedule": {
        "check_schedule": "hypaware.core.schedule",
        "next_fire": "hypaware.core.schedule",
    },
    "secrets": {
        "Secret": "hypaware",
    },
    "state": {
        "InFlightBatch": "hypaware.export.state",
        "ProgressStore": "hypaware",
        "RespoolEntry": "hypaware.export.state",
        "STATE_FILE": "hypaware.export.state",
        "SinkState": "hypaware.export.state",
    },
    "store_errors": {
        "translate_error": "hypaware.blob.errors",
    },
    "table_sink": {
        "TableSink": "hypaware.blob.table_sink",
    },
    "testing.central": {
        "CentralServer": "hypaware.testing.servers.central",
        "Delay": "hypaware.testing.servers.central",
        "Drop": "hypaware.testing.servers.central",
        "Hold": "hypaware.testing.servers.central",
        "RateLimit": "hypaware.testing.servers.central",
        "Reply": "hypaware.testing.servers.central",
        "Seen": "hypaware.testing.servers.central",
    },
    "testing.data": {
        "BASE_TIME": "hypaware.testing.conformance.data",
        "expected_rows": "hypaware.testing.conformance.data",
        "sample_batch": "hypaware.testing.conformance.data",
        "sample_dataset": "hypaware.testing.conformance.data",
        "sample_partition": "hypaware.testing.conformance.data",
        "sample_schema": "hypaware.testing.conformance.data",
        "sample_table": "hypaware.testing.conformance.data",
    },
    "testing.encoder_checks": {
        "ENCODER_CHECKS": "hypaware.testing.conformance.encoder",
        "EncoderCheck": "hypaware.testing.conformance.encoder",
        "EncoderHarness": _SUITE,
    },
    "testing.encoder_contract": {
        "EncoderContract": _SUITE,
        "EncoderHarness": _SUITE,
        "run_encoder_checks": _SUITE,
    },
    "testing.gcs_server": {
        "GCSServer": "hypaware.testing.servers.gcs",
        "run_gcs_server": "hypaware.testing.servers.gcs",
    },
    "testing.peers": {
        "AZURITE_ACCOUNT": "hypaware.testing.servers.peers",
        "AZURITE_KEY": "hypaware.testing.servers.peers",
        "AzuritePeer": "hypaware.testing.servers.peers",
        "GCSServer": "hypaware.testing.servers.gcs",
        "S3Peer": "hypaware.testing.servers.peers",
        "azurite_binary": "hypaware.testing.servers.peers",
        "create_azure_container": "hypaware.testing.servers.peers",
        "free_port": "hypaware.testing.servers.peers",
        "install_azurite": "hypaware.testing.servers.peers",
        "run_azurite": "hypaware.testing.servers.peers",
        "run_gcs_server": "hypaware.testing.servers.gcs",
        "run_moto": "hypaware.testing.servers.peers",
        "run_moto_with_auth": "hypaware.testing.servers.peers",
    },
    "testing.promises": {
        "CheckSkipped": _SUITE,
        "ContractViolation": _SUITE,
        "HookMissing": _SUITE,
        "Promise": _SUITE,
    },
    "testing.queryable_checks": {
        "QUERYABLE_CHECKS": "hypaware.testing.conformance.queryable",
    },
    "testing.queryable_lost_ack": {
        "check_query_after_lost_ack_reads_rows_once": (
            "hypaware.testing.conformance.queryable_lost_ack"
        ),
    },
    "testing.rest_catalog": {
        "RestCatalogServer": "hypaware.testing.servers.rest_catalog",
    },
    "testing.runner": {
        "CheckOutcome": _SUITE,
    },
    "testing.scan_rules": {
        "expect_ids": "hypaware.testing.conformance.scan_rules",
        "expect_types": "hypaware.testing.conformance.scan_rules",
        "expect_values": "hypaware.testing.conformance.scan_rules",
        "ids_once": "hypaware.testing.conformance.scan_rules",
    },
    "testing.sink_checks": {
        "SINK_CHECKS": "hypaware.testing.conformance.sink",
        "SinkCheck": "hypaware.testing.conformance.sink_harness",
        "SinkHarness": _SUITE,
    },
    "testing.sink_delivery_checks": {
        "check_aligned_ids_from_two_caches_both_land": "hypaware.testing.conformance.sink_delivery",
        "check_exports_every_partition": "hypaware.testing.conformance.sink_delivery",
        "check_partition_failure_is_reported": "hypaware.testing.conformance.sink_delivery",
        "check_reexport_is_idempotent": "hypaware.testing.conformance.sink_delivery",
        "check_respool_into_new_batch_is_idempotent": "hypaware.testing.conformance.sink_delivery",
    },
    "testing.sink_harness": {
        "RowsReader": "hypaware.testing.conformance.sink_harness",
        "SinkCheck": "hypaware.testing.conformance.sink_harness",
        "SinkHarness": _SUITE,
    },
    "testing.sink_lifecycle_checks": {
        "check_close_aborts_wait": "hypaware.testing.conformance.sink_lifecycle",
        "check_close_during_export_is_prompt": "hypaware.testing.conformance.sink_lifecycle",
        "check_close_is_idempotent": "hypaware.testing.conformance.sink_lifecycle",
        "check_export_after_close_raises": "hypaware.testing.conformance.sink_lifecycle",
    },
    "testing.sink_safety_checks": {
        "check_hostile_names_stay_under_root": "hypaware.testing.conformance.sink_safety",
        "check_no_secrets_in_reprs": "hypaware.testing.conformance.sink_safety",
    },
    "testing.store_checks": {
        "BAD_PATHS": "hypaware.testing.conformance.store",
        "STORE_CHECKS": "hypaware.testing.conformance.store",
        "StoreCheck": "hypaware.testing.conformance.store",
        "StoreHarness": _SUITE,
    },
    "testing.webhook": {
        "Answer": "hypaware.testing.servers.webhook",
        "Trickle": "hypaware.testing.servers.webhook",
        "WebhookReceiver": "hypaware.testing.servers.webhook",
        "run_webhook_receiver": "hypaware.testing.servers.webhook",
    },
    "types": {
        "DatasetInfo": "hypaware",
        "ExportBatch": "hypaware",
        "ExportOptions": "hypaware",
        "ExportResult": "hypaware",
        "ObjectMeta": "hypaware",
        "PartitionRef": "hypaware",
        "RetryPartition": "hypaware",
    },
    "wire": {
        "PermanentRequestError": "hypaware.request.wire",
        "Reply": "hypaware.request.wire",
        "Wire": "hypaware.request.wire",
        "server_message": "hypaware.request.wire",
    },
}

# Names the 0.2 layout has no counterpart for, and what to use instead.
GONE: dict[str, dict[str, str]] = {
    "query_expr": {
        "parse_where": (
            "queries take a filter tree now: build one with hypaware.parse_filter or "
            "hypaware.col, and bind it to pyarrow with hypaware.plugin.to_arrow"
        ),
    },
}


def forward(module: str) -> Callable[[str], Any]:
    """The module ``__getattr__`` of the old path `module` (``hypaware.<old>``)."""
    old = module.removeprefix("hypaware.")
    table = MOVED.get(old, {})
    gone = GONE.get(old, {})

    def __getattr__(name: str) -> Any:
        home = table.get(name)
        if home is None:
            if name in gone:
                raise ImportError(f"{module}.{name} was removed in 0.2.0: {gone[name]}")
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        internal = "" if home in PUBLIC else " (an internal module)"
        warnings.warn(
            f"{module}.{name} moved to {home}.{name}{internal}; the old path goes in "
            f"hypaware {REMOVED_IN} (see CHANGELOG.md)",
            DeprecationWarning,
            stacklevel=2,
        )
        return getattr(importlib.import_module(home), name)

    return __getattr__


def names(module: str) -> list[str]:
    """The names the old path `module` forwards (its ``__all__``)."""
    return sorted(MOVED.get(module.removeprefix("hypaware."), {}))
