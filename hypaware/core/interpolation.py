"""``${NAME}`` in config strings: environment variables, the way Vector and Compose read them.

In any string value of a config document:

- ``${NAME}`` is the variable's value; unset, it is a `ConfigError` naming
  the key;
- ``${NAME:-default}`` is the value, or ``default`` when the variable is
  unset or empty (the default is taken literally, up to the first ``}``);
- ``$$`` is one literal ``$`` (so ``$${HOME}`` stays ``${HOME}``);
- any other ``$`` is itself.

Keys are never expanded. Fields typed `Secret` keep the reference itself,
so the value is read only when the plugin is built and never sits in a
loaded config (`Secret.reveal` expands it with these same rules).
"""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from typing import Any

import attrs

from hypaware.core.errors import ConfigError, Problem

__all__ = ["escape", "expand", "expand_for", "expand_values", "references"]

_TOKEN = re.compile(r"\$\$|\$\{([^}]*)\}|\$\{")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _parse(body: str) -> tuple[str, str | None] | None:
    name, sep, default = body.partition(":-")
    if not _NAME.fullmatch(name):
        return None
    return name, (default if sep else None)


def expand(text: str, env: Mapping[str, str], *, path: str = "") -> str:
    """`text` with every reference replaced (see the module docstring).

    Raises `ConfigError` at `path` for an unset variable without a default,
    or a malformed reference (``${}``, ``${1X}``, an unclosed ``${``).
    """
    if "$" not in text:
        return text
    out: list[str] = []
    pos = 0
    for match in _TOKEN.finditer(text):
        out.append(text[pos : match.start()])
        pos = match.end()
        token = match.group()
        if token == "$$":
            out.append("$")
            continue
        body = match.group(1)
        parsed = None if body is None else _parse(body)
        if parsed is None:
            raise ConfigError.single(
                path,
                f"malformed reference {token!r}: write ${{NAME}} or ${{NAME:-default}}, "
                "and $$ for a literal $",
            )
        name, default = parsed
        value = env.get(name)
        if default is not None and not value:
            out.append(default)
        elif value is None:
            raise ConfigError.single(
                path,
                f"environment variable {name} is not set (referenced as ${{{name}}}); "
                f"set it, or give a default: ${{{name}:-value}}",
            )
        else:
            out.append(value)
    out.append(text[pos:])
    return "".join(out)


def references(text: str) -> list[str]:
    """The variable names `text` refers to (malformed references are left out)."""
    names = []
    for match in _TOKEN.finditer(text):
        body = match.group(1)
        parsed = None if body is None else _parse(body)
        if parsed is not None:
            names.append(parsed[0])
    return names


def escape(text: str) -> str:
    """The string that `expand` turns back into `text` (every ``$`` doubled)."""
    return text.replace("$", "$$")


def expand_values(value: Any, env: Mapping[str, str], path: str, problems: list[Problem]) -> Any:
    """`value` (any JSON/TOML value) with every string in it expanded; problems collected."""
    if isinstance(value, str):
        try:
            return expand(value, env, path=path)
        except ConfigError as exc:
            problems.extend(exc.problems)
            return value
    if isinstance(value, Mapping):
        return {k: expand_values(v, env, _join(path, k), problems) for k, v in value.items()}
    if isinstance(value, list):
        return [expand_values(v, env, f"{path}[{i}]", problems) for i, v in enumerate(value)]
    return value


def expand_for(
    cls: type,
    data: Mapping[str, Any],
    env: Mapping[str, str],
    path: str,
    problems: list[Problem],
    *,
    keep: type,
) -> dict[str, Any]:
    """The raw config `data` for the attrs class `cls`, expanded except where `keep` is held.

    A field typed `keep`, optional `keep`, or a container of `keep` values
    (``dict[str, Secret]``) is left as written.

    `keep` is `Secret` for the resolver: a secret's reference stays in it,
    to be read at build. Nested attrs classes are followed; keys `cls` does
    not know are expanded like any value (structuring reports them).
    """
    hints = _hints(cls)
    out: dict[str, Any] = {}
    for key, value in data.items():
        where = _join(path, key)
        hint = hints.get(key)
        kinds = _kinds(hint)
        if _holds(hint, keep):
            # A secret, or a container of them (headers: dict[str, Secret]): kept as written.
            out[key] = value
            continue
        nested = next((k for k in kinds if attrs.has(k)), None)
        if nested is not None and isinstance(value, Mapping):
            out[key] = expand_for(nested, value, env, where, problems, keep=keep)
        else:
            out[key] = expand_values(value, env, where, problems)
    return out


def _hints(cls: type) -> dict[str, Any]:
    if not attrs.has(cls):
        return {}
    try:
        resolved = typing.get_type_hints(cls)
    except Exception:
        resolved = {}
    return {(a.alias or a.name): resolved.get(a.name, a.type) for a in attrs.fields(cls)}


def _holds(hint: Any, keep: type) -> bool:
    if hint is keep:
        return True
    if isinstance(hint, str):  # an annotation that could not be resolved: judge by name
        return keep.__name__ in hint
    return any(_holds(arg, keep) for arg in typing.get_args(hint))


def _kinds(hint: Any) -> tuple[Any, ...]:
    if hint is None:
        return ()
    args = typing.get_args(hint)
    return args if typing.get_origin(hint) in (typing.Union, _UnionType) else (hint,)


_UnionType = type(int | None)


def _join(path: str, key: object) -> str:
    return f"{path}.{key}" if path else str(key)
