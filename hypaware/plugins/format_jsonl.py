"""``@hypaware/format-jsonl``: JSON Lines files, optionally gzip or zstd compressed.

Not queryable: JSONL is for downstream tools that read line by line. This
module is light; the encoder lives in `hypaware.encoding.jsonl`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hypaware.core.manifest import BLOB_STORE, PluginManifest
from hypaware.encoding.config import JsonlConfig

if TYPE_CHECKING:
    from hypaware.core.resolver import BuildContext
    from hypaware.encoding.jsonl import JsonlEncoder

__all__ = ["MANIFEST", "JsonlConfig", "create"]


def create(config: JsonlConfig | None, ctx: BuildContext | None = None) -> JsonlEncoder:
    """Factory: the encoder for `config` (defaults when None)."""
    from hypaware.encoding.jsonl import JsonlEncoder

    return JsonlEncoder(config or JsonlConfig())


MANIFEST = PluginManifest(
    name="@hypaware/format-jsonl",
    kind="encoder",
    factory="hypaware.plugins.format_jsonl:create",
    requires={BLOB_STORE},
    config_class=JsonlConfig,
    description="JSON Lines files (one object per row), optionally gzip or zstd",
)
