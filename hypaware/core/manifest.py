"""Plugin manifests: what a plugin is, what it needs, and how to build it.

A manifest is plain data. It names its factory as a dotted path
(``"package.module:function"``) so reading a manifest never imports the
plugin's heavy dependencies.
"""

from __future__ import annotations

import difflib
import importlib
import inspect
import re
import typing
from collections.abc import Callable, Iterable
from typing import Any, Final, Literal, get_args

import attrs

from hypaware.core.errors import PluginError

__all__ = [
    "BLOB_STORE",
    "CAPABILITIES",
    "CAPABILITY_FOR_KIND",
    "ENCODER",
    "FEATURES",
    "HTTP_ENDPOINT",
    "QUERYABLE",
    "SINK",
    "TABLE_FORMAT",
    "Capability",
    "Feature",
    "PluginKind",
    "PluginManifest",
    "did_you_mean",
    "load_object",
]

BLOB_STORE: Final = "hypaware.blob-store"
ENCODER: Final = "hypaware.encoder"
TABLE_FORMAT: Final = "hypaware.table-format"
HTTP_ENDPOINT: Final = "hypaware.http-endpoint"
SINK: Final = "hypaware.sink"
QUERYABLE: Final = "queryable"

PluginKind = Literal["destination", "encoder", "table-format", "sink"]
#: A capability a plugin provides or requires.
Capability = Literal[
    "hypaware.blob-store",
    "hypaware.encoder",
    "hypaware.table-format",
    "hypaware.http-endpoint",
    "hypaware.sink",
]
#: A feature a plugin supports.
Feature = Literal["queryable"]

CAPABILITIES: frozenset[Capability] = frozenset(get_args(Capability))
FEATURES: frozenset[Feature] = frozenset(get_args(Feature))

CAPABILITY_FOR_KIND: dict[PluginKind, Capability] = {
    "destination": BLOB_STORE,
    "encoder": ENCODER,
    "table-format": TABLE_FORMAT,
    "sink": SINK,
}

# What each kind's factory is called with, past (config, ctx), by keyword.
_FACTORY_KEYWORDS: dict[str, tuple[str, ...]] = {"table-format": ("store", "encoder")}

_NAME = re.compile(r"^(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*$")
_DOTTED = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the closest choice, or an empty string."""
    close = difflib.get_close_matches(name, list(choices), n=1, cutoff=0.6)
    return f" (did you mean {close[0]!r}?)" if close else ""


def _capabilities(value: Capability | Iterable[Capability]) -> frozenset[Capability]:
    # Unknown tags pass through here and are refused, naming the plugin, after init.
    if isinstance(value, str):
        return frozenset({value})
    return frozenset(value)


def _features(value: Feature | Iterable[Feature]) -> frozenset[Feature]:
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
    provides: frozenset[Capability] = attrs.field(converter=_capabilities, factory=frozenset)
    requires: frozenset[Capability] = attrs.field(converter=_capabilities, factory=frozenset)
    supports: frozenset[Feature] = attrs.field(converter=_features, factory=frozenset)
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
        if self.config_class is not None and not (
            isinstance(self.config_class, type) and attrs.has(self.config_class)
        ):
            raise PluginError(
                f"plugin {self.name}: config_class {self.config_class!r} is not an attrs class "
                "(decorate it with @attrs.frozen, or give None for a plugin without config)"
            )
        fields: tuple[tuple[str, frozenset[str], frozenset[str]], ...] = (
            ("provides", self.provides, CAPABILITIES),
            ("requires", self.requires, CAPABILITIES),
            ("supports", self.supports, FEATURES),
        )
        for field, tags, known in fields:
            unknown = sorted(t for t in tags if t not in known)
            if unknown:
                raise PluginError(
                    f"plugin {self.name}: {field}: unknown tag(s) {', '.join(map(repr, unknown))}"
                    f"{did_you_mean(unknown[0], known)}; known: {', '.join(sorted(known))}"
                )
        # A plugin always provides its kind's capability, so authors cannot forget it.
        object.__setattr__(self, "provides", self.provides | {CAPABILITY_FOR_KIND[self.kind]})

    @property
    def queryable(self) -> bool:
        return QUERYABLE in self.supports

    def load_factory(self) -> Callable[..., Any]:
        """Import the factory and check it can be called the way hypaware calls it.

        Raises `PluginError` naming the plugin and the `factory` field when it
        cannot be imported, is not callable, does not take the arguments its
        kind is called with (``factory(config, ctx)``; table formats also get
        ``store=`` and ``encoder=`` by keyword), or annotates its config
        parameter with a class `config_class` is not.
        """
        obj = load_object(self.factory, what=f"factory of plugin {self.name}")
        if not callable(obj):
            raise PluginError(
                f"plugin {self.name}: factory {self.factory!r} is a {type(obj).__name__}, "
                "not a callable"
            )
        self._check_signature(obj)
        return obj

    def _check_signature(self, factory: Callable[..., Any]) -> None:
        keywords = _FACTORY_KEYWORDS.get(self.kind, ())
        shown = f"factory(config, ctx{''.join(f', {k}=...' for k in keywords)})"
        try:
            signature = inspect.signature(factory)
        except (TypeError, ValueError):
            return  # a builtin without a signature: nothing to check
        try:
            signature.bind(None, None, **dict.fromkeys(keywords))
        except TypeError as exc:
            raise PluginError(
                f"plugin {self.name}: factory {self.factory!r} cannot be called as a "
                f"{self.kind} factory is, {shown}: {exc}"
            ) from None
        if self.config_class is None:
            return
        first = next(iter(signature.parameters.values()), None)
        if first is None:
            return
        try:
            hints = typing.get_type_hints(factory)
        except Exception:  # annotations that do not resolve here are not ours to judge
            return
        hint = hints.get(first.name)
        if isinstance(hint, type) and hint is not Any and not issubclass(self.config_class, hint):
            raise PluginError(
                f"plugin {self.name}: config_class is {self.config_class.__qualname__}, but "
                f"factory {self.factory!r} takes its config as {hint.__qualname__}"
            )


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
