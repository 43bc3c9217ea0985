"""``@hypaware/gcs``: a destination in a Google Cloud Storage bucket.

The manifest only; the config and the store live in `hypaware.destinations.gcs`.
"""

from __future__ import annotations

from hypaware.core.manifest import QUERYABLE, PluginManifest
from hypaware.destinations.gcs import PLUGIN, GCSConfig, create

__all__ = ["MANIFEST", "GCSConfig", "create"]

MANIFEST = PluginManifest(
    name=PLUGIN,
    kind="destination",
    factory="hypaware.plugins.gcs:create",
    supports={QUERYABLE},
    config_class=GCSConfig,
    description="Objects in a Google Cloud Storage bucket.",
)
