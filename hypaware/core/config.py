"""The configuration as data: the frozen attrs classes a loaded config is made of.

`HypawareConfig` holds a `CacheConfig` and one `SinkSpec` per sink.
`positive` and `FieldValueError` are for config classes, plugins' own
included. `hypaware.core.config_loader` reads a JSON document into these
classes; `hypaware.core.config_converter` holds the cattrs rules it uses.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs

from hypaware.core.errors import ConfigError
from hypaware.core.registry import did_you_mean

__all__ = [
    "DEFAULT_SCHEDULE",
    "SINK_SETTING_KEYS",
    "CacheConfig",
    "FieldValueError",
    "HypawareConfig",
    "SinkSpec",
    "positive",
]

DEFAULT_SCHEDULE = "*/5 * * * *"
SinkShape = Literal["blob", "request"]
SegmentFormat = Literal["arrow", "parquet"]
SegmentCompression = Literal["snappy", "zstd", "lz4", "none"]
# Arrow IPC files compress with LZ4 or zstd only; each format's default codec.
SEGMENT_FORMAT_CODECS: dict[str, tuple[str, ...]] = {
    "arrow": ("lz4", "zstd", "none"),
    "parquet": ("snappy", "zstd", "lz4", "none"),
}
DEFAULT_SEGMENT_CODEC: dict[str, str] = {"arrow": "lz4", "parquet": "snappy"}


class FieldValueError(ValueError):
    """Raised by config validators so the problem is reported at the field's own path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def positive(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """An attrs validator for config classes: the value must be > 0 (None passes)."""
    # "not > 0" rather than "<= 0" so that NaN (from a mapping) is refused too.
    if value is not None and not value > 0:
        raise FieldValueError(attribute.alias or attribute.name, f"must be positive, got {value}")


def _redacted_keys(config: Mapping[str, Any]) -> str:
    # Plugin keys are not typed yet at load time, so any of them may hold a secret.
    return "{" + ", ".join(f"{k!r}: ..." for k in config) + "}"


@attrs.frozen
class CacheConfig:
    """Where the embedded cache lives and how long it keeps sealed partitions.

    - `path` (str, default ``"cache"``): its directory; relative paths are
      taken from the config file's directory.
    - `retention_hours` (number or null, default 168 = 7 days): sealed
      partitions older than this are dropped once every configured sink that
      receives them has exported them; null keeps them.
    - `max_bytes` (integer or null, default null): a hard cap on the size of
      all sealed partitions; past it the oldest go even if a sink still
      needs them (logged as a warning and counted).
    - `max_age_hours` (number or null, default null): a hard cap on the age
      of sealed partitions, with the same rule.
    - `segment_format` (``"arrow"`` | ``"parquet"``, default ``"arrow"``):
      the file format of sealed segments. Arrow IPC segments seal and read
      back at a fraction of Parquet's CPU; Parquet ones are smaller.
    - `compression` (``"lz4"`` | ``"zstd"`` | ``"none"``, and ``"snappy"``
      for Parquet; default ``"lz4"`` for Arrow, ``"snappy"`` for Parquet):
      the codec of sealed segments.

    The process that appends and seals uses these two; segments of either
    format and any codec stay readable.
    """

    path: str = "cache"
    retention_hours: float | None = attrs.field(default=168.0, validator=positive)
    max_bytes: int | None = attrs.field(default=None, validator=positive)
    max_age_hours: float | None = attrs.field(default=None, validator=positive)
    segment_format: SegmentFormat = "arrow"
    compression: SegmentCompression | None = attrs.field(default=None)

    @compression.validator
    def _codec_fits_format(self, _attribute: attrs.Attribute[Any], value: Any) -> None:
        problem = segment_codec_problem(self.segment_format, value)
        if problem:
            raise FieldValueError("compression", problem)


def segment_codec_problem(segment_format: str, compression: str | None) -> str | None:
    """Why `compression` cannot seal segments of `segment_format`, or None when it can."""
    codecs = SEGMENT_FORMAT_CODECS.get(segment_format)
    if codecs is None:
        return f"segment_format must be one of {', '.join(SEGMENT_FORMAT_CODECS)}"
    if compression is not None and compression not in codecs:
        hint = ' (snappy is for segment_format "parquet")' if compression == "snappy" else ""
        return f"{segment_format} segments take {', '.join(codecs)}, not {compression!r}{hint}"
    return None


@attrs.frozen
class SinkSpec:
    """One entry of ``sinks``, as written, before plugins are resolved.

    Exactly one shape: `writer` + `destination` (a blob sink, optionally with
    an explicit `encoder` for table formats) or `plugin` (a request sink).
    Generic settings come out of ``config``; `config` keeps the
    plugin-specific keys.

    - `schedule` (5-field cron, UTC, default ``"*/5 * * * *"``): when the
      driver exports to this sink.
    - `datasets` (list of names, default all): which datasets it receives.
    - `max_batch_rows` (default 1,000,000) and `max_batch_bytes` (default
      256 MiB): bounds of one `ExportBatch`.
    - `export_timeout` (seconds, default 3600): the driver's budget for one
      `export_batch` call.
    - `max_partition_attempts` (default 100): after this many failed attempts
      (or one failure the sink marks not retryable) a partition is parked:
      kept in the cache, out of the retry loop, until ``hypaware retry``.
    """

    name: str
    writer: str | None = None
    destination: str | None = None
    plugin: str | None = None
    encoder: str | None = None
    config: Mapping[str, Any] = attrs.field(factory=dict, repr=_redacted_keys)
    schedule: str = DEFAULT_SCHEDULE
    datasets: tuple[str, ...] | None = None
    max_batch_rows: int = attrs.field(default=1_000_000, validator=positive)
    max_batch_bytes: int = attrs.field(default=256 * 1024 * 1024, validator=positive)
    export_timeout: float = attrs.field(default=3600.0, validator=positive)
    max_partition_attempts: int = attrs.field(default=100, validator=positive)

    @property
    def shape(self) -> SinkShape:
        return "request" if self.plugin is not None else "blob"


# Generic settings a sink's "config" may hold, besides its plugins' own keys.
SINK_SETTING_KEYS = (
    "schedule",
    "datasets",
    "max_batch_rows",
    "max_batch_bytes",
    "export_timeout",
    "max_partition_attempts",
)


@attrs.frozen
class HypawareConfig:
    """A loaded configuration.

    `sinks` are ordered by name, so nothing depends on the order keys were
    written in. `base_dir` is the directory relative paths are taken from
    (the config file's directory; the working directory for a mapping).
    """

    sinks: tuple[SinkSpec, ...] = ()
    cache: CacheConfig = CacheConfig()
    state_dir: str = ".hypaware"
    base_dir: str | None = attrs.field(default=None, eq=False)

    def sink(self, name: str) -> SinkSpec:
        for spec in self.sinks:
            if spec.name == name:
                return spec
        raise ConfigError.single(
            "sinks", f"no such sink {name!r}{did_you_mean(name, [s.name for s in self.sinks])}"
        )

    def resolve_path(self, path: str) -> Path:
        """`path` made absolute against `base_dir`."""
        p = Path(path).expanduser()
        if p.is_absolute():
            return p
        return Path(self.base_dir or os.getcwd()) / p

    @property
    def state_path(self) -> Path:
        return self.resolve_path(self.state_dir)

    @property
    def cache_path(self) -> Path:
        return self.resolve_path(self.cache.path)
