"""An fsspec filesystem over a blob store's own obstore store, for readers like pyarrow.dataset.

obstore's `FsspecStore` builds its stores from URLs and config; this one
reuses the store a destination already built (same credentials, endpoint
and client options), so readers need nothing but the `ObstoreBlobStore`.
Paths in it are ``store/<prefix>/<path>``: the first segment stands in for
the bucket, as fsspec's object-store filesystems expect one.

The store hands over its own path guard (`ObstoreBlobStore.filesystem`):
on a local directory, every path the filesystem opens, reads, lists or
describes is checked for a symbolic link below the root first, exactly as
the store's own operations are, so a query cannot read outside the root.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

__all__ = ["BUCKET", "KeyGuard", "filesystem"]

BUCKET = "store"

KeyGuard = Callable[[str], None]
"""Called with every key in the store before it is touched; raises to refuse it."""


def filesystem(store: Any, prefix: str, guard: KeyGuard | None = None) -> tuple[Any, str]:
    """``(fs, root)``: a filesystem over the obstore `store` for pyarrow, and `prefix` in it.

    `guard`, when given, sees every key before the store is asked about it
    (and every key a listing returns); its exception propagates unchanged.

    Read the dataset ``events`` with
    ``pyarrow.dataset.dataset(f"{root}/events", filesystem=fs, partitioning="hive")``.
    """
    fs = _bound_filesystem_class(store, guard)("s3")
    root = f"{BUCKET}/{prefix}" if prefix else BUCKET
    return fs, root


def _bound_filesystem_class(store: Any, guard: KeyGuard | None) -> type[Any]:
    """An `FsspecStore` subclass over `store` alone, every path it touches shown to `guard`."""
    from obstore.fsspec import FsspecStore

    class _BoundFilesystem(FsspecStore):
        # fsspec caches instances by constructor arguments; two stores must
        # never share one.
        cachable = False

        def _construct_store(self, bucket: str) -> Any:
            return store

        # Every operation of FsspecStore (and its file objects) turns its
        # path into a key here, so one check covers them all.
        def _split_path(self, path: str) -> tuple[str, str]:
            bucket, key = super()._split_path(path)
            if guard is not None and key:
                guard(key.rstrip("/"))
            return bucket, key

        async def _ls(self, path: str, detail: bool = False, **kwargs: Any) -> Any:
            ls: Any = super()._ls
            entries = await ls(path, detail=detail, **kwargs)
            if guard is not None:
                # A listing reports what sits behind a link (its size, its
                # type); refuse it like the store's own listing does.
                for entry in entries:
                    name = entry["name"] if detail else entry
                    self._split_path(name)
            return entries

        # fsspec answers "no" to these when any error occurs, which would
        # turn a refused link into "file not found"; the refusal is the answer.
        async def _isfile(self, path: str) -> bool:
            self._split_path(path)
            return bool(await super()._isfile(path))

        async def _isdir(self, path: str) -> bool:
            self._split_path(path)
            return bool(await super()._isdir(path))

        async def _exists(self, path: str, **kwargs: Any) -> bool:
            self._split_path(path)
            return bool(await super()._exists(path, **kwargs))

        def _open(
            self,
            path: str,
            mode: str = "rb",
            block_size: Any = None,
            autocommit: Any = True,
            cache_options: Any = None,
            **kwargs: Any,
        ) -> Any:
            # Checked before the file object exists: one refused half-way
            # through its constructor would fail again when collected.
            self._split_path(path)
            return super()._open(path, mode, block_size, autocommit, cache_options, **kwargs)

    return _BoundFilesystem
