"""Loading configuration: a TOML or JSON file, or a mapping, into `hypaware.core.config` classes.

The document::

    {"state_dir": ".hypaware",                       # optional
     "cache": {"path": "cache"},                     # optional
     "sinks": {
       "archive": {"writer": "@hypaware/format-iceberg", "destination": "@hypaware/s3",
                   "config": {"bucket": "acme-hyp-archive", "schedule": "0 * * * *"}},
       "forward": {"plugin": "@hypaware/central",
                   "config": {"endpoint": "https://hyp.example", "schedule": "*/5 * * * *"}}}}

The same document in TOML (``hypaware.toml``)::

    state_dir = ".hypaware"
    [sinks.archive]
    writer = "@hypaware/format-iceberg"
    destination = "@hypaware/s3"
    config = { bucket = "${BUCKET}", schedule = "0 * * * *" }

Strings may refer to environment variables (``${NAME}``,
``${NAME:-default}``); see `hypaware.core.config_files` for where they are
expanded. `load_config` checks the document's shape and each sink's generic settings
(`schedule`, `datasets`, batch limits). Plugin-specific keys are checked by
`hypaware.resolve`, which knows the plugins. Problems are collected, not
raised one by one: a `ConfigError` lists every problem with its path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs

from hypaware.core.config import (
    DEFAULT_SCHEDULE,
    SINK_SETTING_KEYS,
    CacheConfig,
    HypawareConfig,
    SinkSpec,
    positive,
)
from hypaware.core.config_converter import join_path, json_type, make_converter, structure_config
from hypaware.core.config_files import (
    ConfigFormat,
    config_format,
    escape_document,
    expand_document,
    read_toml,
    to_toml,
)
from hypaware.core.errors import ConfigError, Problem
from hypaware.core.registry import did_you_mean
from hypaware.core.schedule import check_schedule

__all__ = ["dump_config", "dump_config_text", "load_config"]

_SINK_KEYS = ("writer", "destination", "plugin", "encoder", "config")
_TOP_KEYS = ("sinks", "cache", "state_dir")


class _Object(dict[str, Any]):
    """A JSON object that remembers keys it saw more than once."""

    duplicates: tuple[str, ...] = ()


def _keep_duplicates(pairs: list[tuple[str, Any]]) -> _Object:
    out = _Object()
    dupes: list[str] = []
    for key, value in pairs:
        if key in out:
            dupes.append(key)
        out[key] = value
    out.duplicates = tuple(dupes)
    return out


def _duplicate_problems(obj: Any, path: str) -> list[Problem]:
    problems: list[Problem] = []
    if isinstance(obj, _Object):
        for key in obj.duplicates:
            what = "sink name" if path == "sinks" else "key"
            problems.append(
                Problem(join_path(path, key), f"duplicate {what} {key!r}: it may appear once")
            )
        for key, value in obj.items():
            problems.extend(_duplicate_problems(value, join_path(path, key)))
    elif isinstance(obj, list):
        for i, value in enumerate(obj):
            problems.extend(_duplicate_problems(value, f"{path}[{i}]"))
    return problems


def _read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError.single("", f"config file {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError.single("", f"cannot read config file {str(path)!r}: {exc}") from None
    try:
        doc = json.loads(text, object_pairs_hook=_keep_duplicates)
    except json.JSONDecodeError as exc:
        raise ConfigError.single(
            "", f"{path}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    problems = _duplicate_problems(doc, "")
    if problems:
        raise ConfigError(problems)
    return doc


def load_config(
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    base_dir: str | None = None,
    env: Mapping[str, str] | None = None,
) -> HypawareConfig:
    """Load and check a configuration from a ``.toml`` / ``.json`` file path or a mapping.

    ``${NAME}`` references are read from `env` (default ``os.environ``).
    Raises `ConfigError` listing every problem found, an unset variable
    among them. Plugin-specific keys are checked (and expanded) later, by
    `hypaware.resolve`.
    """
    if isinstance(source, Mapping):
        doc: Any = source
    else:
        path = Path(source)
        doc = read_toml(path) if config_format(path) == "toml" else _read_json(path)
        if base_dir is None:
            base_dir = str(path.resolve().parent)
    problems: list[Problem] = []
    doc = expand_document(doc, os.environ if env is None else env, problems)
    try:
        config = _structure_document(doc, base_dir)
    except ConfigError as exc:
        problems.extend(exc.problems)
    if problems:
        raise ConfigError(problems)
    return config


def _structure_document(doc: Any, base_dir: str | None) -> HypawareConfig:
    problems: list[Problem] = []
    if not isinstance(doc, Mapping):
        raise ConfigError.single("", f"the config must be a JSON object, got {json_type(doc)}")
    for key in doc:
        if key not in _TOP_KEYS:
            problems.append(Problem(str(key), f"unknown key{did_you_mean(str(key), _TOP_KEYS)}"))

    state_dir = doc.get("state_dir", ".hypaware")
    if not isinstance(state_dir, str) or not state_dir:
        problems.append(Problem("state_dir", "expected a non-empty string (a directory)"))
    cache = structure_config(CacheConfig, doc.get("cache"), "cache", problems)

    sinks_doc = doc.get("sinks", {})
    specs: list[SinkSpec] = []
    if not isinstance(sinks_doc, Mapping):
        problems.append(Problem("sinks", f"expected an object, got {json_type(sinks_doc)}"))
    else:
        for name, entry in sinks_doc.items():
            spec = _structure_sink(str(name), entry, problems)
            if spec is not None:
                specs.append(spec)

    if problems:
        raise ConfigError(problems)
    assert cache is not None
    assert isinstance(state_dir, str)
    return HypawareConfig(
        sinks=tuple(sorted(specs, key=lambda s: s.name)),
        cache=cache,
        state_dir=state_dir,
        base_dir=base_dir,
    )


@attrs.frozen
class _SinkSettings:
    schedule: str = DEFAULT_SCHEDULE
    datasets: tuple[str, ...] | None = None
    max_batch_rows: int = attrs.field(default=1_000_000, validator=positive)
    max_batch_bytes: int = attrs.field(default=256 * 1024 * 1024, validator=positive)
    export_timeout: float = attrs.field(default=3600.0, validator=positive)
    max_partition_attempts: int = attrs.field(default=100, validator=positive)


def _structure_sink(name: str, entry: Any, problems: list[Problem]) -> SinkSpec | None:
    path = f"sinks.{name}"
    before = len(problems)
    if not name or name.strip() != name or "/" in name:
        problems.append(Problem(path, "sink names must be non-empty, without '/' or outer spaces"))
    if not isinstance(entry, Mapping):
        problems.append(Problem(path, f"expected an object, got {json_type(entry)}"))
        return None
    for key in entry:
        if key not in _SINK_KEYS:
            problems.append(
                Problem(f"{path}.{key}", f"unknown key{did_you_mean(str(key), _SINK_KEYS)}")
            )
    for key in ("writer", "destination", "plugin", "encoder"):
        value = entry.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            problems.append(Problem(f"{path}.{key}", "expected a plugin name (a string)"))

    has_blob = "writer" in entry or "destination" in entry
    has_plugin = "plugin" in entry
    if has_blob and has_plugin:
        problems.append(
            Problem(
                path,
                "has both shapes: use either 'writer' + 'destination' (a blob sink) "
                "or 'plugin' (a request sink), not both",
            )
        )
    elif not has_blob and not has_plugin:
        problems.append(
            Problem(
                path,
                "has neither shape: give 'writer' + 'destination' (a blob sink) "
                "or 'plugin' (a request sink)",
            )
        )
    elif has_blob:
        for key in ("writer", "destination"):
            if key not in entry:
                problems.append(
                    Problem(
                        f"{path}.{key}",
                        "missing: a blob sink needs both 'writer' and 'destination'",
                    )
                )
    if has_plugin and "encoder" in entry:
        problems.append(Problem(f"{path}.encoder", "only blob sinks take an encoder"))

    raw = entry.get("config", {})
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        problems.append(Problem(f"{path}.config", f"expected an object, got {json_type(raw)}"))
        return None
    generic = {k: raw[k] for k in SINK_SETTING_KEYS if k in raw}
    plugin_keys = {k: v for k, v in raw.items() if k not in SINK_SETTING_KEYS}
    if "datasets" in generic and isinstance(generic["datasets"], list):
        generic["datasets"] = tuple(generic["datasets"])
    settings = structure_config(_SinkSettings, generic, f"{path}.config", problems)
    if settings is not None:
        schedule_problem = check_schedule(settings.schedule)
        if schedule_problem is not None:
            problems.append(
                Problem(f"{path}.config.schedule", f"sink {name!r}: {schedule_problem}")
            )
    if len(problems) > before or settings is None:
        return None
    return SinkSpec(
        name=name,
        writer=entry.get("writer"),
        destination=entry.get("destination"),
        plugin=entry.get("plugin"),
        encoder=entry.get("encoder"),
        config=dict(plugin_keys),
        **attrs.asdict(settings),
    )


def dump_config(config: HypawareConfig) -> dict[str, Any]:
    """The document for `config`; ``load_config(dump_config(c)) == c``.

    Plugin config keys are written as they were (references kept); in the
    other strings, already expanded, every ``$`` is doubled so it loads back
    as itself.
    """
    sinks: dict[str, Any] = {}
    for spec in config.sinks:
        entry: dict[str, Any] = {
            k: getattr(spec, k)
            for k in ("writer", "destination", "plugin", "encoder")
            if getattr(spec, k) is not None
        }
        cfg = dict(spec.config)
        for key in SINK_SETTING_KEYS:
            value = getattr(spec, key)
            cfg[key] = list(value) if isinstance(value, tuple) else value
        entry["config"] = cfg
        sinks[spec.name] = entry
    doc = {
        "state_dir": config.state_dir,
        "cache": make_converter().unstructure(config.cache),
        "sinks": sinks,
    }
    escaped: dict[str, Any] = escape_document(doc)
    return escaped


def dump_config_text(config: HypawareConfig, format: ConfigFormat = "toml") -> str:
    """`config` as the text of a ``.toml`` or ``.json`` file that `load_config` reads back equal.

    TOML leaves out null settings whose default is null; a null that is not
    a default (``cache.retention_hours``, a plugin key) cannot be written in
    TOML and raises `ConfigError` naming the key.
    """
    doc = dump_config(config)
    if format == "json":
        return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"
    _drop_null_defaults(doc["cache"], CacheConfig)
    for entry in doc["sinks"].values():
        _drop_null_defaults(entry["config"], _SinkSettings)
    return to_toml(doc)


def _drop_null_defaults(section: dict[str, Any], cls: type) -> None:
    for field in attrs.fields(cls):
        key = field.alias or field.name
        if key in section and section[key] is None and field.default is None:
            del section[key]
