from __future__ import annotations

import attrs

from hypaware.core.manifest import PluginManifest


@attrs.frozen
class RowLogConfig:
    """`path`: the file rows are appended to (relative to the config file)."""

    path: str = "rowlog.jsonl"


MANIFEST = PluginManifest(
    name="@acme/rowlog",
    kind="sink",
    factory="hypaware_acme.sink:make_sink",
    config_class=RowLogConfig,
    description="Append exported rows to a JSON-lines file.",
)
