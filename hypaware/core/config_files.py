"""Config documents as files: TOML or JSON by extension, and ``${NAME}`` expansion at load.

`load_config` reads ``.toml`` with the standard library's `tomllib` and
``.json`` with `json`; any other extension is refused naming the file. TOML
has no null: leave a key out for its default (a key whose default is not
null, such as ``cache.retention_hours``, cannot be set to null in TOML; use
JSON for that). `dump_config_text` writes either format back, so that
``load_config(write(dump_config_text(c, fmt)))`` equals ``c``.

Expansion (see `hypaware.core.interpolation`) happens in two places: the
keys hypaware itself types (``state_dir``, ``cache``, each sink's plugin
names and generic settings such as ``schedule``) are expanded here, when
the file is loaded; plugin config keys are kept as written and expanded by
`hypaware.resolve`, which knows which of them are secrets. A dumped config
therefore writes plugin keys as written and escapes ``$`` in the others.
"""

from __future__ import annotations

import math
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from hypaware.core.config import SINK_SETTING_KEYS
from hypaware.core.errors import ConfigError, Problem
from hypaware.core.interpolation import escape, expand_values

__all__ = [
    "ConfigFormat",
    "config_format",
    "escape_document",
    "expand_document",
    "read_toml",
    "to_toml",
]

ConfigFormat = Literal["json", "toml"]
_FORMATS: dict[str, ConfigFormat] = {".json": "json", ".toml": "toml"}
_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")
_PLUGIN_NAME_KEYS = ("writer", "destination", "plugin", "encoder")


def config_format(path: Path) -> ConfigFormat:
    """The format of a config file by its extension; `ConfigError` for another one."""
    found = _FORMATS.get(path.suffix.lower())
    if found is None:
        raise ConfigError.single(
            "",
            f"config file {str(path)!r}: unknown extension {path.suffix or '(none)'!r}; "
            "name it .toml or .json",
        )
    return found


def read_toml(path: Path) -> dict[str, Any]:
    """The TOML document at `path`; `ConfigError` naming the file and the line when invalid."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError.single("", f"config file {str(path)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError.single("", f"cannot read config file {str(path)!r}: {exc}") from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError.single("", f"{path}: not valid TOML: {exc}") from None


# ------------------------------------------------------------------ expansion


def _map_generic(doc: Any, on_generic: Any, on_plugin: Any) -> Any:
    """`doc` with `on_generic` applied to the values hypaware types, `on_plugin` to plugin keys."""
    if not isinstance(doc, Mapping):
        return doc
    out: dict[str, Any] = {}
    for key, value in doc.items():
        if key == "sinks" and isinstance(value, Mapping):
            out[key] = {
                name: _map_sink(str(name), entry, on_generic, on_plugin)
                for name, entry in value.items()
            }
        else:
            # An empty key still needs a path a problem can name.
            out[key] = on_generic(value, str(key) or '""')
    return out


def _map_sink(name: str, entry: Any, on_generic: Any, on_plugin: Any) -> Any:
    if not isinstance(entry, Mapping):
        return entry
    path = f"sinks.{name}"
    out: dict[str, Any] = {}
    for key, value in entry.items():
        if key == "config" and isinstance(value, Mapping):
            out[key] = {
                k: (
                    on_generic(v, f"{path}.config.{k}")
                    if k in SINK_SETTING_KEYS
                    else on_plugin(v, f"{path}.config.{k}")
                )
                for k, v in value.items()
            }
        else:
            out[key] = on_generic(value, f"{path}.{key}")
    return out


def expand_document(doc: Any, env: Mapping[str, str], problems: list[Problem]) -> Any:
    """`doc` with references expanded in the values hypaware types; plugin keys as written."""
    return _map_generic(
        doc,
        lambda value, path: expand_values(value, env, path, problems),
        lambda value, _path: value,
    )


def escape_document(doc: Any) -> Any:
    """The reverse of `expand_document` for a dumped config: ``$`` doubled where it expands."""
    return _map_generic(doc, lambda value, _path: _escape_values(value), lambda value, _path: value)


def _escape_values(value: Any) -> Any:
    if isinstance(value, str):
        return escape(value)
    if isinstance(value, Mapping):
        return {k: _escape_values(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escape_values(v) for v in value]
    return value


# ----------------------------------------------------------------- TOML out


def to_toml(doc: Mapping[str, Any]) -> str:
    """`doc` (JSON-like: objects, lists, strings, numbers, booleans) as a TOML document.

    Objects become tables, objects inside lists inline tables. Raises
    `ConfigError` naming the key for a null, which TOML cannot write.
    """
    lines: list[str] = []
    _table(doc, (), lines)
    return "\n".join(lines).lstrip("\n") + "\n"


def _table(doc: Mapping[str, Any], path: tuple[str, ...], lines: list[str]) -> None:
    scalars = [(k, v) for k, v in doc.items() if not isinstance(v, Mapping)]
    tables = [(k, v) for k, v in doc.items() if isinstance(v, Mapping)]
    if path and (scalars or not tables):
        lines.append("")
        lines.append("[" + ".".join(_key(p) for p in path) + "]")
    for key, value in scalars:
        lines.append(f"{_key(key)} = {_value(value, (*path, str(key)))}")
    for key, value in tables:
        _table(value, (*path, str(key)), lines)


def _key(key: object) -> str:
    text = str(key)
    return text if _BARE_KEY.fullmatch(text) else _string(text)


def _string(text: str) -> str:
    out = ['"']
    for ch in text:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _value(value: Any, path: tuple[str, ...]) -> str:
    if value is None:
        raise ConfigError.single(
            ".".join(path), "is null, which TOML cannot write: leave the key out or use JSON"
        )
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, Mapping):
        inner = ", ".join(f"{_key(k)} = {_value(v, (*path, str(k)))}" for k, v in value.items())
        return "{" + inner + "}" if inner else "{}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v, path) for v in value) + "]"
    raise ConfigError.single(
        ".".join(path), f"a {type(value).__name__} cannot be written to a config file"
    )
