"""``@hypaware/central``: the manifest; the sink lives in `hypaware.request.central`."""

from __future__ import annotations

from hypaware.core.manifest import HTTP_ENDPOINT, SINK, PluginManifest
from hypaware.request.central import PLUGIN, CentralConfig, build_central

__all__ = ["MANIFEST", "CentralConfig", "build_central"]

MANIFEST = PluginManifest(
    name=PLUGIN,
    kind="sink",
    factory="hypaware.plugins.central:build_central",
    provides={SINK, HTTP_ENDPOINT},
    config_class=CentralConfig,
    description="Forward rows to a hypaware central server in idempotent chunks",
)
