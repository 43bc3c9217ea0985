"""An fsspec filesystem over a blob store's own obstore store, for readers like pyarrow.dataset.

obstore's `FsspecStore` builds its stores from URLs and config; this one
reuses the store a destination already built (same credentials, endpoint
and client options), so readers need nothing but the `ObstoreBlobStore`.
Paths in it are ``store/<prefix>/<path>``: the first segment stands in for
the bucket, as fsspec's object-store filesystems expect one.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BUCKET", "filesystem"]

BUCKET = "store"


def filesystem(store: Any, prefix: str) -> tuple[Any, str]:
    """``(fs, root)``: a filesystem over the obstore `store` for pyarrow, and `prefix` in it.

    Read the dataset ``events`` with
    ``pyarrow.dataset.dataset(f"{root}/events", filesystem=fs, partitioning="hive")``.
    """
    from obstore.fsspec import FsspecStore

    class _BoundFilesystem(FsspecStore):
        # fsspec caches instances by constructor arguments; two stores must
        # never share one.
        cachable = False

        def _construct_store(self, bucket: str) -> Any:
            return store

    fs = _BoundFilesystem("s3")
    root = f"{BUCKET}/{prefix}" if prefix else BUCKET
    return fs, root
