"""``@hypaware/format-jsonl``: JSON Lines files, optionally gzip or zstd compressed.

Not queryable: JSONL is for downstream tools that read line by line. This
module is light; the encoder lives in `hypaware.encoding.jsonl`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

import attrs

from hypaware.core.config import positive
from hypaware.core.manifest import BLOB_STORE, PluginManifest

if TYPE_CHECKING:
    from hypaware.encoding.jsonl import JsonlEncoder
    from hypaware.core.resolver import BuildContext

__all__ = ["MANIFEST", "JsonlConfig", "create"]

MiB = 1024 * 1024

JsonlCompression = Literal["none", "gzip", "zstd"]


@attrs.frozen
class JsonlConfig:
    """How JSON Lines files are written. Every key is optional.

    - `compression` (``"none"`` | ``"gzip"`` | ``"zstd"``, default ``"none"``):
      files are named ``.jsonl``, ``.jsonl.gz`` or ``.jsonl.zst``. zstd needs
      ``pip install 'hypaware[zstd]'``.
    - `compression_level` (int, default None: gzip 6, zstd 3).
    - `target_file_size` (bytes as stored, default 256 MiB): a file is closed
      once it reaches this size and the next rows start a new file.
    - `lines_per_chunk` (rows, default 4096): how many rows are serialised at
      a time; bounds memory and the rollover overshoot.
    """

    compression: JsonlCompression = "none"
    compression_level: int | None = None
    target_file_size: int = attrs.field(default=256 * MiB, validator=positive)
    lines_per_chunk: int = attrs.field(default=4096, validator=positive)


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
