"""``@hypaware/s3``: a destination in an S3 (or S3-compatible) bucket.

The manifest only; the config and the store live in `hypaware.destinations.s3`.
"""

from __future__ import annotations

from hypaware.core.manifest import QUERYABLE, PluginManifest
from hypaware.destinations.s3 import PLUGIN, S3Config, create

__all__ = ["MANIFEST", "S3Config", "create"]

MANIFEST = PluginManifest(
    name=PLUGIN,
    kind="destination",
    factory="hypaware.plugins.s3:create",
    supports={QUERYABLE},
    config_class=S3Config,
    description="Objects in an S3 or S3-compatible bucket.",
)
