"""Plugin manifests: what a plugin is, what it needs, and how to build it.

A manifest is plain data. It names its factory as a dotted path
(``"package.module:function"``) so reading a manifest never imports the
plugin's heavy dependencies.
"""

from __future__ import annotations

import difflib
import importlib
import re
from collections.abc import Callable, Iterable
from typing import Any, Literal

import attrs

from hypaware.core.errors import PluginError

__all__ = [
    "BLOB_STORE",
    "CAPABILITY_FOR_KIND",
    "ENCODER",
    "HTTP_ENDPOINT",
    "QUERYABLE",
    "SINK",
    "TABLE_FORMAT",
    "PluginKind",
    "PluginManifest",
    "load_object",
    "tag_problems",
]

BLOB_STORE = "hypaware.blob-store"
ENCODER = "hypaware.encoder"
TABLE_FORMAT = "hypaware.table-format"
HTTP_ENDPOINT = "hypaware.http-endpoint"
SINK = "hypaware.sink"
QUERYABLE = "queryable"

PluginKind = Literal["destination", "encoder", "table-format", "sink"]

CAPABILITY_FOR_KIND: dict[str, str] = {
    "destination": BLOB_STORE,
    "encoder": ENCODER,
    "table-format": TABLE_FORMAT,
    "sink": SINK,
}

# The tags hypaware itself gives meaning to. A plugin may add its own
# capabilities and features, but only in a namespace of its own ("acme.queue"):
# an unknown tag without one, or in hypaware's, is a typo.
CAPABILITIES = frozenset({BLOB_STORE, ENCODER, TABLE_FORMAT, HTTP_ENDPOINT, SINK})
FEATURES = frozenset({QUERYABLE})

_NAME = re.compile(r"^(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*$")
_DOTTED = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def _frozen_strs(value: Any) -> frozenset[str]:
    if isinstance(value, str):
        return frozenset({value})
    return frozenset(value)


def _str_tuple(value: Iterable[str]) -> tuple[str, ...]:
    if isinstance(value, str):
        return (value,)
    return tuple(value)


@attrs.frozen
class PluginManifest:
    """Describes one plugin.

    - `name`: what configs call it, ``@scope/name`` or ``name`` (lower case).
    - `kind`: ``destination`` (a blob store), ``encoder``, ``table-format`` or
      ``sink`` (a one-piece request sink).
    - `provides` / `requires`: capability tags, e.g. ``hypaware.blob-store``.
      A plugin always provides the capability of its kind.
    - `supports`: feature tags; ``queryable`` is recognised.
    - `config_class`: an attrs class that cattrs structures the plugin's
      config into, or None if it takes no config.
    - `factory`: ``"module:callable"``, imported only when the plugin is built.
      Its signature depends on `kind` (see ``docs/writing-plugins.md``).
    - `encoders`: for table formats, the encoder plugins it accepts, most
      preferred first.
    """

    name: str
    kind: PluginKind
    factory: str
    provides: frozenset[str] = attrs.field(converter=_frozen_strs, factory=frozenset)
    requires: frozenset[str] = attrs.field(converter=_frozen_strs, factory=frozenset)
    supports: frozenset[str] = attrs.field(converter=_frozen_strs, factory=frozenset)
    config_class: type | None = None
    encoders: tuple[str, ...] = attrs.field(default=(), converter=_str_tuple)
    description: str = ""

    def __attrs_post_init__(self) -> None:
        if not _NAME.match(self.name):
            raise PluginError(
                f"plugin name {self.name!r} is not valid: use '@scope/name' or 'name', "
                "lower case letters, digits, '.', '_' and '-'"
            )
        if self.kind not in CAPABILITY_FOR_KIND:
            raise PluginError(
                f"plugin {self.name}: kind {self.kind!r} is not one of "
                f"{', '.join(sorted(CAPABILITY_FOR_KIND))}"
            )
        if not _DOTTED.match(self.factory):
            raise PluginError(
                f"plugin {self.name}: factory {self.factory!r} is not a 'module:attribute' path"
            )
        if self.config_class is not None and not attrs.has(self.config_class):
            raise PluginError(f"plugin {self.name}: config_class must be an attrs class")
        # A plugin always provides its kind's capability, so authors cannot forget it.
        object.__setattr__(self, "provides", self.provides | {CAPABILITY_FOR_KIND[self.kind]})

    @property
    def queryable(self) -> bool:
        return QUERYABLE in self.supports

    def load_factory(self) -> Callable[..., Any]:
        """Import and return the factory. Raises `PluginError` naming the plugin."""
        obj = load_object(self.factory, what=f"factory of plugin {self.name}")
        if not callable(obj):
            raise PluginError(f"factory {self.factory} of plugin {self.name} is not callable")
        return obj


def load_object(dotted: str, *, what: str) -> object:
    """Import ``module:attr.attr``; errors are `PluginError` naming `what`."""
    module_name, _, attr_path = dotted.partition(":")
    try:
        obj: object = importlib.import_module(module_name)
        for part in attr_path.split("."):
            obj = getattr(obj, part)
    except ImportError as exc:
        hint = f" ({exc.msg})" if getattr(exc, "msg", None) else ""
        raise PluginError(f"cannot import {what} {dotted!r}{hint}") from exc
    except AttributeError as exc:
        raise PluginError(f"cannot find {what} {dotted!r}: {exc}") from exc
    return obj


def _tag_problem(tag: str, known: frozenset[str], field: str, name: str) -> str | None:
    if tag in known:
        return None
    namespace, dot, _ = tag.partition(".")
    if dot and namespace != "hypaware" and namespace:
        return None
    close = difflib.get_close_matches(tag, sorted(known), n=1, cutoff=0.6)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return (
        f"plugin {name}: unknown {field} tag {tag!r}{hint}; hypaware knows "
        f"{', '.join(sorted(known))}, and a plugin's own tags need a namespace ('acme.{tag}')"
    )


def tag_problems(manifest: PluginManifest) -> list[str]:
    """Why each of `manifest`'s tags is unknown (a typo), one message per tag."""
    out = []
    for field, tags, known in (
        ("provides", manifest.provides, CAPABILITIES),
        ("requires", manifest.requires, CAPABILITIES),
        ("supports", manifest.supports, FEATURES),
    ):
        for tag in sorted(tags):
            problem = _tag_problem(tag, known, field, manifest.name)
            if problem is not None:
                out.append(problem)
    return out
