"""A text snapshot of hypaware's public surface, and the check that keeps it announced.

The public surface is the names in ``__all__`` of `hypaware`, `hypaware.plugin`
and `hypaware.testing.conformance` (docs/writing-plugins.md, "Imports"). Each
name becomes one line (its kind and signature); a class is followed by
indented lines for its public members. The snapshot is committed as
``docs/api-surface.txt``; its first line records a hash of CHANGELOG.md's top
section (from its first ``## `` heading to its second) as it was when the
snapshot was written.

    python tools/api_surface.py            # print the snapshot
    python tools/api_surface.py --write    # record it in docs/api-surface.txt
    python tools/api_surface.py --check    # exit 1 if the surface changed

``--check`` fails, with a unified diff, when the surface differs from the
committed snapshot. ``--write`` refuses to record a changed surface while
CHANGELOG.md's top section is the one recorded with the previous snapshot:
a change to the surface needs an entry there first.

Standard library only (plus hypaware itself, which must be importable).
"""

from __future__ import annotations

import argparse
import difflib
import enum
import functools
import hashlib
import importlib
import inspect
import re
import sys
import typing
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
MODULES = ("hypaware", "hypaware.plugin", "hypaware.testing.conformance")
INDENT = "    "
HASH_PREFIX = "# changelog: "
HEADER = (
    "# The public surface of hypaware, written by `python tools/api_surface.py --write`.\n"
    "# Do not edit: `--check` (the lint session) compares it with the code.\n"
)

_ADDRESS = re.compile(r" at 0x[0-9a-fA-F]+|0x[0-9a-fA-F]{6,}")
_SIMPLE = (str, int, float, bool, type(None))


# -- rendering ---------------------------------------------------------------


def _clean(text: str) -> str:
    """Drop memory addresses, so reprs are the same on every run."""
    return _ADDRESS.sub("", text)


def _is_simple(value: Any) -> bool:
    if isinstance(value, enum.Enum):
        return False
    if isinstance(value, tuple):
        return all(_is_simple(v) for v in value)
    return isinstance(value, _SIMPLE)


def _annotation(ann: Any) -> str:
    """An annotation as written: strings verbatim, anything else by a stable name."""
    if isinstance(ann, str):
        return ann
    if isinstance(ann, type):
        if ann.__module__ == "builtins":
            return ann.__qualname__
        return f"{ann.__module__}.{ann.__qualname__}"
    return _clean(repr(ann).replace("typing.", ""))


def _default(value: Any) -> str:
    factory = getattr(value, "factory", None)
    if type(value).__name__ == "Factory" and factory is not None:
        name = getattr(factory, "__qualname__", None) or repr(factory)
        return _clean(f"Factory({name})")
    if isinstance(value, enum.Enum):
        return f"{type(value).__qualname__}.{value.name}"
    if inspect.isfunction(value) or inspect.isclass(value):
        return value.__qualname__
    return _clean(repr(value))


def _signature(obj: Any) -> str:
    """``(params) -> ret``, rendered by hand so every Python version writes it alike."""
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return "(...)"
    parts: list[str] = []
    seen_kw_only = False
    for i, param in enumerate(sig.parameters.values()):
        kind = param.kind
        if kind is param.VAR_POSITIONAL:
            seen_kw_only = True
            text = f"*{param.name}"
        elif kind is param.VAR_KEYWORD:
            text = f"**{param.name}"
        else:
            if kind is param.KEYWORD_ONLY and not seen_kw_only:
                parts.append("*")
                seen_kw_only = True
            text = param.name
        if param.annotation is not param.empty:
            text += f": {_annotation(param.annotation)}"
        if param.default is not param.empty:
            eq = " = " if param.annotation is not param.empty else "="
            text += f"{eq}{_default(param.default)}"
        parts.append(text)
        following = list(sig.parameters.values())[i + 1 :]
        if kind is param.POSITIONAL_ONLY and (
            not following or following[0].kind is not param.POSITIONAL_ONLY
        ):
            parts.append("/")
    text = f"({', '.join(parts)})"
    if sig.return_annotation is not sig.empty:
        text += f" -> {_annotation(sig.return_annotation)}"
    return text


def _def(name: str, func: Any, prefix: str = "") -> str:
    target = inspect.unwrap(func)
    keyword = "async def" if inspect.iscoroutinefunction(target) else "def"
    return f"{prefix}{keyword} {name}{_signature(func)}"


def _constant(name: str, value: Any) -> str:
    if _is_simple(value):
        return f"{name}: {type(value).__name__} = {_clean(repr(value))}"
    if isinstance(value, enum.Enum):
        return f"{name}: {type(value).__qualname__} = {type(value).__qualname__}.{value.name}"
    return f"{name}: {type(value).__name__}"


def _base(base: type) -> str:
    if base.__module__ == "builtins" or base.__module__.startswith("hypaware"):
        return base.__qualname__
    return f"{base.__module__}.{base.__qualname__}"


def _own_classes(cls: type) -> list[type]:
    """The class and the bases hypaware defines, most derived first."""
    return [c for c in cls.__mro__ if c is cls or (c.__module__ or "").split(".")[0] == "hypaware"]


def _is_attrs(cls: type) -> bool:
    return "__attrs_attrs__" in vars(cls)


def _is_protocol(cls: type) -> bool:
    return bool(getattr(cls, "_is_protocol", False))


def _member(name: str, value: Any, cls: type, annotations: dict[str, Any]) -> str | None:
    if _is_fixture(value):
        return f"fixture {name}"
    if isinstance(value, staticmethod):
        return _def(name, value.__func__, "@staticmethod ")
    if isinstance(value, classmethod):
        return _def(name, value.__func__, "@classmethod ")
    if isinstance(value, property):
        ret = "" if value.fget is None else _return(value.fget)
        setter = " (settable)" if value.fset is not None else ""
        return f"property {name}{ret}{setter}"
    if isinstance(value, functools.cached_property):
        return f"cached_property {name}{_return(value.func)}"
    if inspect.isfunction(value):
        return _def(name, value)
    if inspect.isclass(value):
        return f"class {name}"
    if type(value).__name__ in ("member_descriptor", "getset_descriptor"):
        ann = annotations.get(name)
        return f"attr {name}" + (f": {_annotation(ann)}" if ann is not None else "")
    ann = annotations.get(name)
    typed = f": {_annotation(ann)}" if ann is not None else f": {type(value).__name__}"
    if _is_simple(value):
        return f"{name}{typed} = {_clean(repr(value))}"
    return f"{name}{typed}"


def _return(func: Any) -> str:
    try:
        ret = inspect.signature(func).return_annotation
    except (TypeError, ValueError):
        return ""
    return "" if ret is inspect.Signature.empty else f": {_annotation(ret)}"


def _class(name: str, cls: type) -> list[str]:
    bases = ", ".join(_base(b) for b in cls.__bases__ if b is not object)
    head = f"class {name}({bases})" if bases else f"class {name}"
    members: dict[str, str] = {}
    if issubclass(cls, enum.Enum):
        for member_name, member in cls.__members__.items():
            members[member_name] = f"{member_name} = {_clean(repr(member.value))}"
    if _is_attrs(cls):
        import attrs  # hypaware depends on attrs; only attrs classes need it.

        for field in attrs.fields(cls):
            if field.name.startswith("_"):
                continue
            text = f"field {field.name}"
            if field.type is not None:
                text += f": {_annotation(field.type)}"
            if field.default is not attrs.NOTHING:
                text += f" = {_default(field.default)}"
            if not field.init:
                text += " (not in __init__)"
            members.setdefault(field.name, text)
    for klass in _own_classes(cls):
        annotations = inspect.get_annotations(klass)
        for member_name, value in vars(klass).items():
            if member_name.startswith("_") or member_name in members:
                continue
            if isinstance(value, enum.Enum) and isinstance(value, cls):
                continue
            line = _member(member_name, value, klass, annotations)
            if line is not None:
                members[member_name] = line
        if _is_protocol(klass) or not _is_attrs(klass):
            # Attributes a Protocol (or a plain class) declares without a value.
            for member_name, ann in annotations.items():
                if member_name.startswith("_") or member_name in members:
                    continue
                if isinstance(ann, str) and ann.startswith(("ClassVar", "typing.ClassVar")):
                    members[member_name] = f"{member_name}: {ann}"
                else:
                    members[member_name] = f"attr {member_name}: {_annotation(ann)}"
    return [head, *(INDENT + members[k] for k in sorted(members))]


def _is_alias(obj: Any) -> bool:
    """A typing construct (``Literal[...]``, ``A | B``, ``list[int]``) bound to a name."""
    return typing.get_origin(obj) is not None


def _is_fixture(value: Any) -> bool:
    """A pytest fixture (a wrapper object in pytest 8.4+, a marked function before)."""
    return type(value).__name__ == "FixtureFunctionDefinition" or hasattr(
        value, "_pytestfixturefunction"
    )


def _entry(name: str, obj: Any) -> list[str]:
    if _is_alias(obj):
        return [f"{name} = {_annotation(obj)}"]
    if inspect.isclass(obj):
        return _class(name, obj)
    if inspect.isfunction(obj) or inspect.isbuiltin(obj):
        return [_def(name, obj)]
    if isinstance(obj, typing.TypeVar):
        return [f"{name}: TypeVar"]
    if callable(obj) and not _is_simple(obj):
        return [f"{name}: {type(obj).__name__}{_signature(obj)}"]
    return [_constant(name, obj)]


def surface() -> str:
    """The snapshot's body (everything after the hash line)."""
    lines = [HEADER.rstrip("\n")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for module_name in MODULES:
            module = importlib.import_module(module_name)
            lines.append("")
            lines.append(f"[{module_name}]")
            for name in sorted(module.__all__):
                lines.extend(_entry(name, getattr(module, name)))
    return "\n".join(lines) + "\n"


# -- the changelog and the snapshot file --------------------------------------


def changelog_top(path: Path) -> str:
    """CHANGELOG's top section: from its first ``## `` heading up to its second."""
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    starts = [i for i, line in enumerate(lines) if line.startswith("## ")]
    if not starts:
        raise SystemExit(f"{path}: no '## ' heading, so no top section to check")
    end = starts[1] if len(starts) > 1 else len(lines)
    return "".join(lines[starts[0] : end])


def changelog_hash(path: Path) -> str:
    return hashlib.sha256(changelog_top(path).encode("utf-8")).hexdigest()


def read_snapshot(path: Path) -> tuple[str | None, str] | None:
    """(recorded changelog hash, body), or None if there is no snapshot yet."""
    if not path.exists():
        return None
    text = path.read_text(encoding="utf-8")
    first, _, rest = text.partition("\n")
    if first.startswith(HASH_PREFIX):
        return first.removeprefix(HASH_PREFIX).strip(), rest
    return None, text


def _diff(old: str, new: str, path: Path) -> str:
    return "".join(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=f"{path} (committed)",
            tofile="the code (now)",
        )
    )


def check(snapshot: Path, changelog: Path) -> int:
    current = surface()
    found = read_snapshot(snapshot)
    if found is None:
        print(
            f"{snapshot} does not exist: run python tools/api_surface.py --write", file=sys.stderr
        )
        return 1
    recorded, body = found
    if body == current:
        print(f"the public surface matches {snapshot}")
        return 0
    sys.stdout.write(_diff(body, current, snapshot))
    if recorded == changelog_hash(changelog):
        print(
            f"the public surface changed; add an entry to {changelog.name}'s top section "
            "and run python tools/api_surface.py --write",
            file=sys.stderr,
        )
    else:
        print(
            f"the public surface changed; {changelog.name}'s top section changed too: "
            "run python tools/api_surface.py --write to record the new surface",
            file=sys.stderr,
        )
    return 1


def write(snapshot: Path, changelog: Path) -> int:
    current = surface()
    digest = changelog_hash(changelog)
    found = read_snapshot(snapshot)
    if found is not None:
        recorded, body = found
        if body != current and recorded == digest:
            sys.stdout.write(_diff(body, current, snapshot))
            print(
                f"the public surface changed but {changelog.name}'s top section did not: "
                f"describe the change there ({changelog}), then run --write again",
                file=sys.stderr,
            )
            return 1
    snapshot.parent.mkdir(parents=True, exist_ok=True)
    snapshot.write_text(f"{HASH_PREFIX}{digest}\n{current}", encoding="utf-8")
    print(f"wrote {snapshot}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help="record the surface in the snapshot")
    mode.add_argument("--check", action="store_true", help="exit 1 if the surface changed")
    parser.add_argument("--changelog", type=Path, default=ROOT / "CHANGELOG.md")
    parser.add_argument("--snapshot", type=Path, default=ROOT / "docs" / "api-surface.txt")
    args = parser.parse_args(argv)
    if args.write:
        return write(args.snapshot, args.changelog)
    if args.check:
        return check(args.snapshot, args.changelog)
    sys.stdout.write(surface())
    return 0


if __name__ == "__main__":
    sys.exit(main())
