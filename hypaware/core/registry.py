"""The plugin registry: a read-only mapping from plugin name to manifest.

First-party and third-party plugins are found the same way, through the
``hypaware.plugins`` entry-point group. A registry can also be built by hand
(for embedding and tests); once built it cannot change, only be extended into
a new registry.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from importlib import metadata
from types import MappingProxyType

from hypaware.core.errors import PluginError
from hypaware.core.manifest import PluginManifest, did_you_mean

__all__ = ["ENTRY_POINT_GROUP", "Registry", "did_you_mean"]

ENTRY_POINT_GROUP = "hypaware.plugins"


class Registry(Mapping[str, PluginManifest]):
    """Plugins by name. Refuses two plugins with one name."""

    __slots__ = ("_origins", "_plugins")

    def __init__(
        self,
        manifests: Iterable[PluginManifest] = (),
        *,
        origins: Mapping[str, str] | None = None,
    ) -> None:
        plugins: dict[str, PluginManifest] = {}
        for manifest in manifests:
            if not isinstance(manifest, PluginManifest):
                raise PluginError(
                    f"registry entries must be PluginManifest, got {type(manifest).__name__}"
                )
            if manifest.name in plugins:
                raise PluginError(f"plugin {manifest.name} is registered twice")
            plugins[manifest.name] = manifest
        self._plugins = MappingProxyType(plugins)
        self._origins = MappingProxyType(dict(origins or {}))

    @classmethod
    def from_entry_points(
        cls, group: str = ENTRY_POINT_GROUP, *, extra: Iterable[PluginManifest] = ()
    ) -> Registry:
        """Load every plugin registered under `group` (plus `extra`).

        Raises `PluginError` listing every entry point that cannot be imported,
        is not a `PluginManifest`, whose name differs from its manifest's, or
        whose factory cannot be imported or called the way hypaware calls it
        (`PluginManifest.load_factory`).
        """
        manifests: list[PluginManifest] = []
        origins: dict[str, str] = {}
        problems: list[str] = []
        seen: dict[str, str] = {}
        for ep in sorted(metadata.entry_points(group=group), key=lambda e: e.name):
            dist = ep.dist.name if ep.dist is not None else "unknown"
            label = f"entry point {ep.name!r} ({ep.value}) from {dist}"
            if ep.name in seen:
                if seen[ep.name] == ep.value:
                    continue  # the same distribution seen twice on sys.path
                problems.append(f"{label}: plugin name already registered by {seen[ep.name]}")
                continue
            try:
                obj = ep.load()
            except Exception as exc:  # a broken third-party module must be named, not crash us
                problems.append(f"{label}: cannot be loaded: {type(exc).__name__}: {exc}")
                continue
            if not isinstance(obj, PluginManifest):
                problems.append(f"{label}: is a {type(obj).__name__}, not a PluginManifest")
                continue
            if obj.name != ep.name:
                problems.append(f"{label}: names manifest {obj.name!r}; the names must match")
                continue
            try:
                # As pluggy checks hook implementations when they register: a
                # factory that cannot be called as hypaware calls it fails here.
                obj.load_factory()
            except PluginError as exc:
                problems.append(f"{label}: {exc}")
                continue
            seen[ep.name] = ep.value
            manifests.append(obj)
            origins[obj.name] = dist
        if problems:
            raise PluginError("; ".join(problems))
        extra = tuple(extra)
        for manifest in extra:
            origins.setdefault(manifest.name, "<registered by hand>")
        return cls([*manifests, *extra], origins=origins)

    def with_plugins(self, *manifests: PluginManifest) -> Registry:
        """A new registry holding these plugins too. Refuses a name already present."""
        origins = dict(self._origins)
        for manifest in manifests:
            origins.setdefault(manifest.name, "<registered by hand>")
        return Registry([*self._plugins.values(), *manifests], origins=origins)

    def origin(self, name: str) -> str:
        """The distribution a plugin comes from, or ``<registered by hand>``."""
        self[name]
        return self._origins.get(name, "<registered by hand>")

    def lookup(self, name: str) -> PluginManifest:
        """The manifest called `name`; `PluginError` with a did-you-mean otherwise."""
        try:
            return self._plugins[name]
        except KeyError:
            raise PluginError(
                f"unknown plugin {name!r}{did_you_mean(name, self._plugins)}"
            ) from None

    def __getitem__(self, name: str) -> PluginManifest:
        return self._plugins[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._plugins)

    def __len__(self) -> int:
        return len(self._plugins)

    def __repr__(self) -> str:
        return f"Registry({sorted(self._plugins)})"
