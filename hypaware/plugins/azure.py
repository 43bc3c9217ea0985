"""``@hypaware/azure``: a destination in an Azure Blob Storage container.

The manifest only; the config and the store live in `hypaware.destinations.azure`.
"""

from __future__ import annotations

from hypaware.core.manifest import QUERYABLE, PluginManifest
from hypaware.destinations.azure import PLUGIN, AzureConfig, create

__all__ = ["MANIFEST", "AzureConfig", "create"]

MANIFEST = PluginManifest(
    name=PLUGIN,
    kind="destination",
    factory="hypaware.plugins.azure:create",
    supports={QUERYABLE},
    config_class=AzureConfig,
    description="Objects in an Azure Blob Storage container.",
)
