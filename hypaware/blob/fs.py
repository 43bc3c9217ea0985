"""An fsspec filesystem over a blob store's own obstore store, for readers like pyarrow.dataset.

obstore's `FsspecStore` builds its stores from URLs and config; this one
reuses the store a destination already built (same credentials, endpoint
and client options), so readers need nothing but the `ObstoreBlobStore`.
Paths in it are ``store/<prefix>/<path>``: the first segment stands in for
the bucket, as fsspec's object-store filesystems expect one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from hypaware.blob.store import ObstoreBlobStore

__all__ = ["BUCKET", "filesystem"]

BUCKET = "store"


def filesystem(blob_store: ObstoreBlobStore) -> tuple[Any, str]:
    """``(fs, root)``: an fsspec filesystem (pyarrow accepts it) and the store's root in it.

    Read the dataset ``events`` with
    ``pyarrow.dataset.dataset(f"{root}/events", filesystem=fs, partitioning="hive")``.
    """
    from obstore.fsspec import FsspecStore

    store = blob_store.store

    class _BoundFilesystem(FsspecStore):
        # fsspec caches instances by constructor arguments; two stores must
        # never share one.
        cachable = False

        def _construct_store(self, bucket: str) -> Any:
            return store

    fs = _BoundFilesystem("s3")
    root = f"{BUCKET}/{blob_store.prefix}" if blob_store.prefix else BUCKET
    return fs, root
