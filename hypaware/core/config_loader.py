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
from hypaware.core.config_converter import json_type, make_converter, structure_config
from hypaware.core.config_files import (
    ConfigFormat,
    config_format,
    escape_document,
    expand_document,
    read_toml,
    to_toml,
)
from hypaware.core.config_json import check_depth, read_json
from hypaware.core.config_names import local_path_problem, sink_name_problem
from hypaware.core.errors import ConfigError, Problem
from hypaware.core.registry import did_you_mean
from hypaware.core.schedule import check_schedule

__all__ = ["dump_config", "dump_config_text", "load_config", "load_partial"]

_SINK_KEYS = ("writer", "destination", "plugin", "encoder", "config")
_TOP_KEYS = ("sinks", "cache", "state_dir")


def load_config(
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    base_dir: str | None = None,
    env: Mapping[str, str] | None = None,
) -> HypawareConfig:
    """Load and check a configuration from a ``.toml`` / ``.json`` file path or a mapping.

    ``${NAME}`` references are read from `env` (default ``os.environ``).
    Raises `ConfigError` listing every problem found, for any input: a file
    that cannot be read or parsed (named in the message), an unset variable,
    and anything that is neither a path nor a mapping. Plugin-specific keys
    are checked (and expanded) later, by `hypaware.resolve`.
    """
    config, problems = load_partial(source, base_dir=base_dir, env=env)
    if problems:
        raise ConfigError(problems)
    return config


def load_partial(
    source: str | os.PathLike[str] | Mapping[str, Any],
    *,
    base_dir: str | None = None,
    env: Mapping[str, str] | None = None,
) -> tuple[HypawareConfig, list[Problem]]:
    """The config as far as it could be read, and every problem found on the way.

    A sink whose generic settings are wrong still appears (with defaults in
    their place) so that its plugins can be checked too: ``check-config``
    reports everything in one run. A document that cannot be read at all
    raises `ConfigError`.
    """
    doc, base_dir = _read_source(source, base_dir)
    problems: list[Problem] = []
    doc = expand_document(doc, os.environ if env is None else env, problems)
    config = _structure_document(doc, base_dir, problems)
    return config, problems


def _read_source(source: Any, base_dir: str | None) -> tuple[Any, str | None]:
    if isinstance(source, Mapping):
        check_depth(source, "the config")
        return source, base_dir
    if isinstance(source, str | os.PathLike):
        try:
            path = Path(source)
        except TypeError as exc:
            raise ConfigError.single("", f"not a config file path: {exc}") from None
        if config_format(path) == "toml":
            doc = read_toml(path)
            check_depth(doc, str(path))
        else:
            doc = read_json(path)
        if not isinstance(doc, Mapping):
            raise ConfigError.single(
                "", f"{path}: the config must be a JSON object, got {json_type(doc)}"
            )
        if base_dir is None:
            base_dir = str(path.absolute().parent)
        return doc, base_dir
    raise ConfigError.single(
        "",
        f"load_config takes a path to a .toml or .json file or a mapping (a parsed document), "
        f"got {type(source).__name__}",
    )


def _structure_document(doc: Any, base_dir: str | None, problems: list[Problem]) -> HypawareConfig:
    if not isinstance(doc, Mapping):
        raise ConfigError.single("", f"the config must be a JSON object, got {json_type(doc)}")
    for key in doc:
        if key not in _TOP_KEYS:
            problems.append(
                Problem(
                    str(key),
                    f"unknown key {str(key)!r} (the top level takes {', '.join(_TOP_KEYS)})"
                    f"{did_you_mean(str(key), _TOP_KEYS)}",
                )
            )

    state_dir = doc.get("state_dir", ".hypaware")
    if not isinstance(state_dir, str):
        problems.append(Problem("state_dir", "expected a non-empty string (a directory)"))
        state_dir = ".hypaware"
    elif (why := local_path_problem(state_dir)) is not None:
        problems.append(Problem("state_dir", f"{why}: give a directory for hypaware's state"))
    cache = structure_config(CacheConfig, doc.get("cache"), "cache", problems)
    if cache is not None and (why := local_path_problem(cache.path)) is not None:
        problems.append(Problem("cache.path", f"{why}: give the cache's directory"))

    sinks_doc = doc.get("sinks", {})
    specs: list[SinkSpec] = []
    if not isinstance(sinks_doc, Mapping):
        problems.append(Problem("sinks", f"expected an object, got {json_type(sinks_doc)}"))
    else:
        for name, entry in sinks_doc.items():
            spec = _structure_sink(str(name), entry, problems)
            if spec is not None:
                specs.append(spec)

    return HypawareConfig(
        sinks=tuple(sorted(specs, key=lambda s: s.name)),
        cache=cache or CacheConfig(),
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
    """The sink's spec, or None if its plugins cannot even be named.

    Wrong generic settings (schedule, batch limits, datasets) are problems
    but still give a spec, with defaults in their place, so the resolver can
    check the sink's plugins in the same run.
    """
    path = f"sinks.{name}"
    if (why := sink_name_problem(name)) is not None:
        problems.append(Problem(path, why))
    if not isinstance(entry, Mapping):
        problems.append(Problem(path, f"expected an object, got {json_type(entry)}"))
        return None
    before = len(problems)
    for key in entry:
        if key not in _SINK_KEYS:
            problems.append(
                Problem(f"{path}.{key}", f"unknown key{did_you_mean(str(key), _SINK_KEYS)}")
            )
    for key in ("writer", "destination", "plugin", "encoder"):
        value = entry.get(key)
        if key in entry and (not isinstance(value, str) or not value):
            problems.append(Problem(f"{path}.{key}", "expected a plugin name (a string)"))
    _check_shape(entry, path, problems)

    raw = entry.get("config", {})
    if raw is None:
        raw = {}
    if not isinstance(raw, Mapping):
        problems.append(Problem(f"{path}.config", f"expected an object, got {json_type(raw)}"))
        return None
    if len(problems) > before:
        # The plugins cannot be named, so only the generic settings can be checked.
        _settings(name, raw, path, problems)
        return None
    settings = _settings(name, raw, path, problems)
    return SinkSpec(
        name=name,
        writer=entry.get("writer"),
        destination=entry.get("destination"),
        plugin=entry.get("plugin"),
        encoder=entry.get("encoder"),
        config={k: v for k, v in raw.items() if k not in SINK_SETTING_KEYS},
        **attrs.asdict(settings),
    )


def _check_shape(entry: Mapping[str, Any], path: str, problems: list[Problem]) -> None:
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


def _settings(
    name: str, raw: Mapping[str, Any], path: str, problems: list[Problem]
) -> _SinkSettings:
    """The generic settings in `raw`; each wrong one is a problem and its default is used."""
    generic = {k: raw[k] for k in SINK_SETTING_KEYS if k in raw}
    if "datasets" in generic and isinstance(generic["datasets"], list):
        generic["datasets"] = tuple(generic["datasets"])
    settings = structure_config(_SinkSettings, generic, f"{path}.config", problems)
    if settings is None:
        good = {}
        for key, value in generic.items():
            if structure_config(_SinkSettings, {key: value}, "", []) is not None:
                good[key] = value
        settings = _SinkSettings(**good)
    schedule_problem = check_schedule(settings.schedule)
    if schedule_problem is not None:
        problems.append(Problem(f"{path}.config.schedule", f"sink {name!r}: {schedule_problem}"))
        settings = attrs.evolve(settings, schedule=DEFAULT_SCHEDULE)
    return settings


def dump_config(config: HypawareConfig) -> dict[str, Any]:
    """The document for `config`; ``load_config(dump_config(c)) == c``.

    Plugin config keys are written as they were (references kept); in the
    other strings, already expanded, every ``$`` is doubled so it loads back
    as itself.
    """
    sinks: dict[str, Any] = {}
    for spec in config.sinks:
        parts = {
            "writer": spec.writer,
            "destination": spec.destination,
            "plugin": spec.plugin,
            "encoder": spec.encoder,
        }
        entry: dict[str, Any] = {k: v for k, v in parts.items() if v is not None}
        cfg = dict(spec.config)
        fields = attrs.asdict(spec, recurse=False)
        for key in SINK_SETTING_KEYS:
            value = fields[key]
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
