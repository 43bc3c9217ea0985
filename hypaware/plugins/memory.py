"""``@hypaware/memory``: a destination held in this process's memory.

The manifest only; the config and the store live in `hypaware.destinations.memory`.
"""

from __future__ import annotations

from hypaware.core.manifest import QUERYABLE, PluginManifest
from hypaware.destinations.memory import PLUGIN, MemoryConfig, create

__all__ = ["MANIFEST", "MemoryConfig", "create"]

MANIFEST = PluginManifest(
    name=PLUGIN,
    kind="destination",
    factory="hypaware.plugins.memory:create",
    supports={QUERYABLE},
    config_class=MemoryConfig,
    description="Objects in this process's memory (tests, embedding).",
)
