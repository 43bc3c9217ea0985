"""Reading a JSON config file into plain data, refusing anything the loader cannot use.

Every way a file can be malformed ends as one `ConfigError` naming the file:
unreadable, not UTF-8, not JSON, nested deeper than `MAX_DEPTH`, an integer
too long to convert, ``NaN``/``Infinity`` or a float that overflows, a key
given twice. `check_depth` is shared with mappings given in-process, so
another reader (another file format) can sit beside `read_json` and hand
the loader the same kind of document.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hypaware.core.config_converter import join_path
from hypaware.core.errors import ConfigError, Problem

__all__ = ["MAX_DEPTH", "MAX_FILE_BYTES", "check_depth", "read_json"]

# A config is a few levels deep (sinks.NAME.config.catalog.properties); far
# past that is a broken or hostile file, and refusing it early keeps every
# later walk over the document well inside Python's recursion limit.
MAX_DEPTH = 32
# Configs are kilobytes; a file this large is not one.
MAX_FILE_BYTES = 16 * 1024 * 1024


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


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number; write a finite number")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large")
    return value


def _walk(doc: Any) -> list[tuple[str, Any, int]]:
    """Every (path, value, depth) in `doc`, iteratively, stopping past `MAX_DEPTH`."""
    out: list[tuple[str, Any, int]] = []
    stack: list[tuple[str, Any, int]] = [("", doc, 0)]
    while stack:
        path, value, depth = stack.pop()
        out.append((path, value, depth))
        if depth > MAX_DEPTH:
            continue
        if isinstance(value, Mapping):
            stack.extend((join_path(path, k), v, depth + 1) for k, v in value.items())
        elif isinstance(value, list | tuple):
            stack.extend((f"{path}[{i}]", v, depth + 1) for i, v in enumerate(value))
    return out


def check_depth(doc: Any, origin: str) -> None:
    """`ConfigError` if `doc` nests deeper than `MAX_DEPTH` (`origin` names the source)."""
    for path, _value, depth in _walk(doc):
        if depth > MAX_DEPTH:
            raise ConfigError.single(
                path.partition("[")[0],
                f"{origin}: nested more than {MAX_DEPTH} levels deep; a config is a few levels",
            )


def _what(path: str) -> str:
    return "sink name" if path == "sinks" else "key"


def read_json(path: Path) -> Any:
    """The document in the JSON file at `path`; `ConfigError` naming the file otherwise."""
    name = str(path)
    try:
        with path.open("rb") as f:
            data = f.read(MAX_FILE_BYTES + 1)
    except FileNotFoundError:
        raise ConfigError.single("", f"config file {name!r} does not exist") from None
    except (OSError, ValueError) as exc:
        # ValueError: a path with a NUL byte cannot even be opened.
        raise ConfigError.single("", f"cannot read config file {name!r}: {exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise ConfigError.single(
            "", f"{name}: larger than {MAX_FILE_BYTES // (1024 * 1024)} MiB; not a config file"
        )
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise ConfigError.single(
            "", f"{name}: not UTF-8 text (byte {exc.start}, line {line}): save it as UTF-8"
        ) from None
    try:
        doc = json.loads(
            text,
            object_pairs_hook=_keep_duplicates,
            parse_constant=_no_constant,
            parse_float=_finite,
        )
    except json.JSONDecodeError as exc:
        raise ConfigError.single(
            "", f"{name}: not valid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
        ) from None
    except RecursionError:
        raise ConfigError.single(
            "", f"{name}: not a usable config: nested more than {MAX_DEPTH} levels deep"
        ) from None
    except ValueError as exc:
        # Integers past Python's digit limit, NaN/Infinity, floats that overflow.
        raise ConfigError.single("", f"{name}: not a usable JSON config: {exc}") from None
    check_depth(doc, name)
    problems = [
        Problem(join_path(where, key), f"duplicate {_what(where)} {key!r}: it may appear once")
        for where, value, _depth in _walk(doc)
        if isinstance(value, _Object)
        for key in value.duplicates
    ]
    if problems:
        raise ConfigError(sorted(problems, key=lambda p: p.path))
    return doc
