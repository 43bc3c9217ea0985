"""``@hypaware/local-fs``: a destination in a local directory.

Objects are files under `root`; each is written to a hidden temporary file
and renamed into place, so a reader never sees half a file.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from ..config import FieldValueError
from ..errors import ConfigError
from ..manifest import QUERYABLE, PluginManifest

if TYPE_CHECKING:
    from ..blob_store import ObstoreBlobStore
    from ..resolver import BuildContext

__all__ = ["MANIFEST", "PLUGIN", "LocalFsConfig", "create"]

PLUGIN = "@hypaware/local-fs"


def _non_empty(_inst: object, attribute: attrs.Attribute[Any], value: str) -> None:
    if not value or "\x00" in value:
        raise FieldValueError(attribute.name, "must be a directory path")


@attrs.frozen(kw_only=True)
class LocalFsConfig:
    """Config of ``@hypaware/local-fs``.

    - `root` (str, required, e.g. ``"exports"``): the directory objects go
      under; relative paths are taken from the config file's directory; ``~``
      is expanded. Created (with parents) if missing.
    """

    root: str = attrs.field(validator=_non_empty)


def create(config: LocalFsConfig, ctx: BuildContext) -> ObstoreBlobStore:
    """Create the root directory if needed and build the blob store."""
    from obstore.store import LocalStore

    from ..blob_store import ObstoreBlobStore

    root = ctx.resolve_path(config.root).resolve()
    try:
        root.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError.single(
            f"sinks.{ctx.sink_name}.config.root",
            f"cannot create directory {str(root)!r}: {exc.strerror or exc}",
        ) from exc
    if not root.is_dir():
        raise ConfigError.single(
            f"sinks.{ctx.sink_name}.config.root", f"{str(root)!r} is not a directory"
        )
    url = root.as_uri()
    return ObstoreBlobStore(
        LocalStore(root), label=f"sink {ctx.sink_name!r} ({PLUGIN} {url})", url=url
    )


MANIFEST = PluginManifest(
    name=PLUGIN,
    kind="destination",
    factory="hypaware.plugins.local_fs:create",
    supports={QUERYABLE},
    config_class=LocalFsConfig,
    description="Files under a local directory.",
)
