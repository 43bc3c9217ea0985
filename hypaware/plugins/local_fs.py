"""``@hypaware/local-fs``: a destination in a local directory.

The manifest only; the config and the store live in `hypaware.destinations.local_fs`.
"""

from __future__ import annotations

from hypaware.core.manifest import QUERYABLE, PluginManifest
from hypaware.destinations.local_fs import PLUGIN, LocalFsConfig, create

__all__ = ["MANIFEST", "LocalFsConfig", "create"]

MANIFEST = PluginManifest(
    name=PLUGIN,
    kind="destination",
    factory="hypaware.plugins.local_fs:create",
    supports={QUERYABLE},
    config_class=LocalFsConfig,
    description="Files under a local directory.",
)
