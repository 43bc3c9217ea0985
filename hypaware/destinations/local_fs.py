"""``@hypaware/local-fs``: a destination in a local directory.

Objects are files under `root`; each is written to a temporary
``<name>#<n>`` file and renamed into place, so a reader never sees half a
file. A write killed midway leaves its temporary file behind; building the
destination removes such files once they are an hour old (no live write
takes that long, and object names never end in ``#<digits>``), so readers
that list the directory themselves (``pyarrow.dataset``) do not trip on them.
"""

from __future__ import annotations

import logging
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import attrs

from hypaware.core.config import FieldValueError
from hypaware.core.errors import ConfigError

if TYPE_CHECKING:
    from hypaware.blob.store import ObstoreBlobStore
    from hypaware.core.resolver import BuildContext

__all__ = ["PLUGIN", "LocalFsConfig", "create"]

PLUGIN = "@hypaware/local-fs"
STAGING_MAX_AGE = 3600.0

log = logging.getLogger(__name__)
_STAGING = re.compile(r"#\d+$")


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

    from hypaware.blob.store import ObstoreBlobStore

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
    sweep_staging(root, older_than=STAGING_MAX_AGE)
    url = root.as_uri()
    return ObstoreBlobStore(
        LocalStore(root), label=f"sink {ctx.sink_name!r} ({PLUGIN} {url})", url=url
    )


def sweep_staging(root: Path, *, older_than: float, now: float | None = None) -> int:
    """Remove temporary ``<name>#<n>`` files under `root` older than `older_than` seconds.

    Returns how many were removed. Files that vanish or cannot be removed
    meanwhile are skipped: this is tidying, never a reason to fail a build.
    """
    cutoff = (time.time() if now is None else now) - older_than
    removed = 0
    for directory, _dirs, files in os.walk(root):
        for name in files:
            if not _STAGING.search(name):
                continue
            path = Path(directory, name)
            try:
                if path.stat().st_mtime < cutoff:
                    path.unlink()
                    removed += 1
            except OSError:
                continue
    if removed:
        log.info(
            "removed %d temporary files left by interrupted writes under %s",
            removed,
            root,
            extra={"destination": PLUGIN, "root": str(root)},
        )
    return removed
