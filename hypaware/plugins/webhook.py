"""``@hypaware/webhook``: the manifest; the sink lives in `hypaware.webhooks.sink`."""

from __future__ import annotations

from hypaware.core.manifest import HTTP_ENDPOINT, SINK, PluginManifest
from hypaware.webhooks.sink import PLUGIN, WebhookConfig, build_webhook

__all__ = ["MANIFEST", "WebhookConfig", "build_webhook"]

MANIFEST = PluginManifest(
    name=PLUGIN,
    kind="sink",
    factory="hypaware.plugins.webhook:build_webhook",
    provides={SINK, HTTP_ENDPOINT},
    config_class=WebhookConfig,
    description="POST rows to an HTTP endpoint as signed, idempotent JSON chunks",
)
