"""The cattrs rules configs are structured with, and their errors as `Problem`s with paths.

Scalars are strict (no bool for a number, no number for a string), unknown
keys are refused with a did-you-mean, and a failed validator is reported at
its field's own path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar

import attrs
import cattrs
from cattrs.errors import ClassValidationError, ForbiddenExtraKeysError
from cattrs.v import format_exception

from hypaware.core.config import FieldValueError
from hypaware.core.errors import Problem
from hypaware.core.registry import did_you_mean
from hypaware.core.secrets import Secret

__all__ = ["join_path", "json_type", "make_converter", "structure_config"]

T = TypeVar("T")


def _strict(kind: type, label: str) -> Any:
    def hook(value: Any, _type: Any) -> Any:
        # bool is an int in Python but never what a config author meant by a number.
        if isinstance(value, bool) and kind is not bool:
            raise TypeError(f"expected {label}, got a boolean")
        if kind is float and isinstance(value, int):
            return float(value)
        if not isinstance(value, kind):
            raise TypeError(f"expected {label}, got {json_type(value)}")
        return value

    return hook


def json_type(value: Any) -> str:
    """How problems name the JSON type of `value`: "a number", "an object", ..."""
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
        raise TypeError(f"expected a string or ${{ENV_VAR}} reference, got {json_type(value)}")
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
        problems.append(Problem(path, f"expected an object, got {json_type(data)}"))
        return None
    known = dict(data)
    if attrs.has(cls):
        names = [a.alias for a in attrs.fields(cls)]
        for key in data:
            if key not in names:
                problems.append(
                    Problem(join_path(path, key), f"unknown key{did_you_mean(str(key), names)}")
                )
        known = {k: v for k, v in data.items() if k in names}
    failed = len(known) != len(data)
    try:
        value = conv.structure(known, cls)
    except (ClassValidationError, ForbiddenExtraKeysError, TypeError, ValueError) as exc:
        fields = _field_problems(cls, known, path, conv)
        problems.extend(fields or _whole_object(exc, path))
        if fields:
            # The cross-key checks too, on the keys that are right on their own.
            bad = {p.path for p in fields}
            rest = {k: v for k, v in known.items() if join_path(path, k) not in bad}
            try:
                conv.structure(rest, cls)
            except (ClassValidationError, ForbiddenExtraKeysError, TypeError, ValueError) as more:
                problems.extend(p for p in _whole_object(more, path) if p.path not in bad)
        return None
    return None if failed else value


def _whole_object(exc: Exception, path: str) -> list[Problem]:
    if isinstance(exc, ClassValidationError | ForbiddenExtraKeysError):
        return _problems_from_cattrs(exc, path)
    return [Problem(path, str(exc))]


def _field_problems(
    cls: type, data: Mapping[str, Any], path: str, conv: cattrs.Converter
) -> list[Problem]:
    """Every field of `data` that is wrong on its own: its type, then its validator.

    attrs runs validators one after another and stops at the first failure;
    checking each field alone reports all of them in one go. Cross-field
    checks (``__attrs_post_init__``) are left to the whole-object error.
    """
    if not attrs.has(cls):
        return []
    try:
        fields = attrs.fields(attrs.resolve_types(cls))
    except (NameError, TypeError):
        return []
    problems: list[Problem] = []
    for field in fields:
        if field.alias not in data or field.type is None:
            continue
        where = join_path(path, field.alias)
        try:
            value = conv.structure(data[field.alias], field.type)
        except (ClassValidationError, ForbiddenExtraKeysError) as exc:
            problems.extend(_problems_from_cattrs(exc, where))
            continue
        except Exception as exc:
            problems.append(Problem(where, _format_exception(exc, field.type)))
            continue
        if field.validator is None:
            continue
        try:
            field.validator(None, field, value)
        except FieldValueError as exc:
            problems.append(Problem(join_path(path, exc.field), exc.message))
        except (TypeError, ValueError) as exc:
            problems.append(Problem(where, str(exc)))
        except Exception:
            # A validator that needs the whole instance: the object's own error covers it.
            continue
    return problems


def join_path(path: str, key: object) -> str:
    """The problem path of `key` under `path` (just `key` at the top)."""
    return f"{path}.{key}" if path else str(key)
