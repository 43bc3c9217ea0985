"""Loading configuration: JSON (a file or a mapping) into frozen attrs classes.

The document::

    {"state_dir": ".hypaware",                       # optional
     "cache": {"path": "cache"},                     # optional
     "sinks": {
       "archive": {"writer": "@hypaware/format-iceberg", "destination": "@hypaware/s3",
                   "config": {"bucket": "acme-hyp-archive", "schedule": "0 * * * *"}},
       "forward": {"plugin": "@hypaware/central",
                   "config": {"endpoint": "https://hyp.example", "schedule": "*/5 * * * *"}}}}

`load_config` checks the document's shape and each sink's generic settings
(`schedule`, `datasets`, batch limits). Plugin-specific keys are checked by
`hypaware.resolve`, which knows the plugins. Problems are collected, not
raised one by one: a `ConfigError` lists every problem with its path.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal, TypeVar

import attrs
import cattrs
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError
from cattrs.v import format_exception

from hypaware.core.errors import ConfigError, Problem
from hypaware.core.registry import did_you_mean
from hypaware.core.schedule import check_schedule
from hypaware.core.secrets import Secret

__all__ = [
    "DEFAULT_SCHEDULE",
    "CacheConfig",
    "FieldValueError",
    "HypawareConfig",
    "SinkSpec",
    "dump_config",
    "load_config",
    "make_converter",
    "positive",
    "structure_config",
]

T = TypeVar("T")

DEFAULT_SCHEDULE = "*/5 * * * *"
SinkShape = Literal["blob", "request"]


class FieldValueError(ValueError):
    """Raised by config validators so the problem is reported at the field's own path."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def positive(_inst: object, attribute: attrs.Attribute[Any], value: Any) -> None:
    """An attrs validator for config classes: the value must be > 0 (None passes)."""
    if value is not None and value <= 0:
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
    """

    path: str = "cache"
    retention_hours: float | None = attrs.field(default=168.0, validator=positive)
    max_bytes: int | None = attrs.field(default=None, validator=positive)
    max_age_hours: float | None = attrs.field(default=None, validator=positive)


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

    @property
    def shape(self) -> SinkShape:
        return "request" if self.plugin is not None else "blob"


# Generic settings a sink's "config" may hold, besides its plugins' own keys.
SINK_SETTING_KEYS = ("schedule", "datasets", "max_batch_rows", "max_batch_bytes", "export_timeout")
_SINK_KEYS = ("writer", "destination", "plugin", "encoder", "config")
_TOP_KEYS = ("sinks", "cache", "state_dir")


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
            f"sinks.{name}", f"no such sink{did_you_mean(name, [s.name for s in self.sinks])}"
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


# ---------------------------------------------------------------- converter


def _strict(kind: type, label: str) -> Any:
    def hook(value: Any, _type: Any) -> Any:
        # bool is an int in Python but never what a config author meant by a number.
        if isinstance(value, bool) and kind is not bool:
            raise TypeError(f"expected {label}, got a boolean")
        if kind is float and isinstance(value, int):
            return float(value)
        if not isinstance(value, kind):
            raise TypeError(f"expected {label}, got {_json_type(value)}")
        return value

    return hook


def _json_type(value: Any) -> str:
    return {
        bool: "a boolean",
        int: "a number",
        float: "a number",
        str: "a string",
        list: "a list",
        dict: "an object",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _structure_secret(value: Any, _type: Any) -> Secret:
    if isinstance(value, Secret):
        return value
    if not isinstance(value, str):
        raise TypeError(f"expected a string or ${{ENV_VAR}} reference, got {_json_type(value)}")
    return Secret(value)


def make_converter() -> cattrs.Converter:
    """The converter hypaware structures configs with: strict scalars, no unknown keys.

    Plugin authors get the same rules by using it for their config classes
    (the resolver does this for them).
    """
    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook(str, _strict(str, "a string"))
    conv.register_structure_hook(int, _strict(int, "an integer"))
    conv.register_structure_hook(float, _strict(float, "a number"))
    conv.register_structure_hook(bool, _strict(bool, "true or false"))
    conv.register_structure_hook(Secret, _structure_secret)
    conv.register_unstructure_hook(Secret, lambda s: s.unwrap_raw())
    return conv


_FIELD_MARK = "\x00"


def _format_exception(exc: BaseException, type_: Any) -> str:
    if isinstance(exc, FieldValueError):
        return f"{_FIELD_MARK}{exc.field}{_FIELD_MARK}{exc.message}"
    # Our own hooks already word their messages for config authors; keep them.
    if isinstance(exc, TypeError | ValueError) and str(exc).startswith(("expected", "must")):
        return str(exc)
    if isinstance(exc, ValueError) and str(exc):
        return str(exc)
    return format_exception(exc, type_)


def _problems_from_cattrs(exc: Exception, path: str) -> list[Problem]:
    problems: list[Problem] = []
    for line in cattrs.transform_error(exc, path="$", format_exception=_format_exception):
        message, _, where = line.rpartition(" @ ")
        if not message:
            message, where = line, "$"
        sub = where[1:].lstrip(".")
        if message.startswith(_FIELD_MARK):
            field, _, message = message[1:].partition(_FIELD_MARK)
            sub = ".".join(p for p in (sub, field) if p)
        full = ".".join(p for p in (path, sub) if p)
        problems.append(Problem(full, message))
    return problems


def structure_config(
    cls: type[T],
    data: Any,
    path: str,
    problems: list[Problem],
    converter: cattrs.Converter | None = None,
) -> T | None:
    """Structure `data` into `cls`, appending problems (with paths under `path`) on failure.

    Unknown keys get a did-you-mean; attrs validator failures and wrong
    types are reported with the field's path. Returns None on failure.
    """
    conv = converter or make_converter()
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        problems.append(Problem(path, f"expected an object, got {_json_type(data)}"))
        return None
    if attrs.has(cls):
        names = [a.alias for a in attrs.fields(cls)]
        unknown = [k for k in data if k not in names]
        for key in unknown:
            problems.append(
                Problem(_join(path, key), f"unknown key{did_you_mean(str(key), names)}")
            )
        if unknown:
            return None
    try:
        return conv.structure(dict(data), cls)
    except (ClassValidationError, ForbiddenExtraKeysError) as exc:
        problems.extend(_problems_from_cattrs(exc, path))
    except (TypeError, ValueError) as exc:
        problems.append(Problem(path, str(exc)))
    return None


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)


# ------------------------------------------------------------------ loading


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
                Problem(_join(path, key), f"duplicate {what} {key!r}: it may appear once")
            )
        for key, value in obj.items():
            problems.extend(_duplicate_problems(value, _join(path, key)))
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
    source: str | os.PathLike[str] | Mapping[str, Any], *, base_dir: str | None = None
) -> HypawareConfig:
    """Load and check a configuration from a JSON file path or a mapping.

    Raises `ConfigError` listing every problem found. Plugin-specific keys
    are checked later, by `hypaware.resolve`.
    """
    if isinstance(source, Mapping):
        doc: Any = source
    else:
        path = Path(source)
        doc = _read_json(path)
        if base_dir is None:
            base_dir = str(path.resolve().parent)
    return _structure_document(doc, base_dir)


def _structure_document(doc: Any, base_dir: str | None) -> HypawareConfig:
    problems: list[Problem] = []
    if not isinstance(doc, Mapping):
        raise ConfigError.single("", f"the config must be a JSON object, got {_json_type(doc)}")
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
        problems.append(Problem("sinks", f"expected an object, got {_json_type(sinks_doc)}"))
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


def _structure_sink(name: str, entry: Any, problems: list[Problem]) -> SinkSpec | None:
    path = f"sinks.{name}"
    before = len(problems)
    if not name or name.strip() != name or "/" in name:
        problems.append(Problem(path, "sink names must be non-empty, without '/' or outer spaces"))
    if not isinstance(entry, Mapping):
        problems.append(Problem(path, f"expected an object, got {_json_type(entry)}"))
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
        problems.append(Problem(f"{path}.config", f"expected an object, got {_json_type(raw)}"))
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
    """The JSON document for `config`; ``load_config(dump_config(c)) == c``."""
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
    return {
        "state_dir": config.state_dir,
        "cache": make_converter().unstructure(config.cache),
        "sinks": sinks,
    }
