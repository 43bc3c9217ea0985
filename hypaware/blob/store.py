"""The one `BlobStore` implementation: an obstore store plus a root prefix.

Destination plugins only turn their config into an obstore store; everything
else (path safety, streaming and multipart writes, error translation, the
"delete of a missing object is fine" rule) lives here so every destination
behaves the same.
"""

from __future__ import annotations

import os
import stat
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from hypaware.blob.errors import translate_error
from hypaware.core.contracts import BlobStore
from hypaware.core.errors import NotFoundError, PathError, StoreError
from hypaware.core.paths import check_list_prefix, check_path, check_prefix
from hypaware.core.types import ObjectMeta

if TYPE_CHECKING:
    from obstore.store import ObjectStore

__all__ = ["DEFAULT_CHUNK_SIZE", "ObstoreBlobStore", "describe_store_url", "location_url"]

# S3 refuses multipart parts under 5 MiB (except the last); 8 MiB keeps the
# part count of a 1 GiB object near 128 while bounding what one put buffers.
DEFAULT_CHUNK_SIZE = 8 * 1024 * 1024
MIN_REMOTE_CHUNK_SIZE = 5 * 1024 * 1024
# A local file or memory takes a part without a request, so a small one only
# bounds what a put holds (a part is buffered whole before it is written).
LOCAL_CHUNK_SIZE = 2 * 1024 * 1024
MIN_CHUNK_SIZE = 1024 * 1024
DEFAULT_MAX_CONCURRENCY = 8

_BytesLike = bytes | bytearray | memoryview


def describe_store_url(store: ObjectStore) -> str:
    """A URL naming the store's root, without credentials (``s3://bucket``, ``file:///dir``)."""
    from obstore.store import AzureStore, GCSStore, LocalStore, MemoryStore, S3Store

    if isinstance(store, S3Store):
        return f"s3://{store.config.get('bucket', '')}"
    if isinstance(store, GCSStore):
        return f"gs://{store.config.get('bucket', '')}"
    if isinstance(store, AzureStore):
        return f"az://{store.config.get('container_name', '')}"
    if isinstance(store, LocalStore):
        return f"file://{store.prefix or ''}"
    if isinstance(store, MemoryStore):
        return "memory://"
    return f"{type(store).__name__}://"


def location_url(store: ObjectStore) -> str | None:
    """The URL Iceberg engines use for the root of an obstore store (None: no such URL).

    Table and file locations are written in the catalog with it, so other
    engines (Spark, Trino, pyiceberg's own FileIO) find the files: ``s3://``,
    ``gs://``, ``abfss://container@account.dfs.core.windows.net``, ``file://``.
    """
    from obstore.store import AzureStore, GCSStore, LocalStore, S3Store

    if isinstance(store, LocalStore):
        return f"file://{store.prefix}" if store.prefix is not None else "file://"
    if isinstance(store, S3Store) and store.config.get("bucket"):
        base = f"s3://{store.config['bucket']}"
    elif isinstance(store, GCSStore) and store.config.get("bucket"):
        base = f"gs://{store.config['bucket']}"
    elif (
        isinstance(store, AzureStore)
        and store.config.get("container_name")
        and store.config.get("account_name")
    ):
        config = store.config
        base = f"abfss://{config['container_name']}@{config['account_name']}.dfs.core.windows.net"
    else:
        return None
    inner = store.prefix
    return f"{base}/{inner}".rstrip("/") if inner else base


def _is_local(store: ObjectStore) -> bool:
    from obstore.store import LocalStore, MemoryStore

    return isinstance(store, LocalStore | MemoryStore)


def _join(chunks: list[Any]) -> bytes:
    if len(chunks) == 1 and isinstance(chunks[0], bytes):
        return chunks[0]
    return b"".join(memoryview(c).cast("B") for c in chunks)


class _Counted:
    """Wraps a byte stream to count its size and recognise the producer's own errors."""

    def __init__(self) -> None:
        self.size = 0
        self.producer_error: BaseException | None = None

    def sync_prefixed(self, first: list[Any], rest: Iterator[Any]) -> Iterator[Any]:
        yield from first
        try:
            for chunk in rest:
                self.size += len(memoryview(chunk).cast("B"))
                yield chunk
        except BaseException as exc:
            self.producer_error = exc
            raise

    async def prefixed(self, first: list[Any], rest: AsyncIterator[Any]) -> AsyncIterator[Any]:
        for chunk in first:
            yield chunk
        try:
            async for chunk in rest:
                self.size += len(memoryview(chunk).cast("B"))
                yield chunk
        except BaseException as exc:
            self.producer_error = exc
            raise


class ObstoreBlobStore:
    """A `BlobStore` over any obstore store, rooted at `prefix` inside it.

    - `store`: an obstore store (S3, GCS, Azure, local, memory).
    - `prefix`: the root inside that store (``""`` for the whole store); it
      is checked like a path.
    - `label`: names this store in error messages, e.g.
      ``sink 'archive' (@hypaware/s3)``; never holds credentials.
    - `url`: the root as a URL for messages and docs; derived from the store
      when not given.
    - `chunk_size` / `max_concurrency`: multipart part size and parallel
      parts. Streams up to `chunk_size` go up in one request. The part size
      defaults to 8 MiB for remote stores (at least 5 MiB, the S3 minimum)
      and 2 MiB for local and memory stores (at least 1 MiB).

    On a local directory (obstore's LocalStore) no operation goes through a
    symbolic link below the root: obstore would follow it and write, read,
    list or delete outside the root, so every existing directory (and the
    file) on the way is checked first and a link is a `PathError` naming it.
    The root itself may be a link. `filesystem()` and the Iceberg FileIO
    run the same check (`check_key`). A directory swapped for a link between
    the check and the write is not caught: keep the root writable only by
    whoever runs the export.

    Writes are whole-or-nothing: a single request, or a multipart upload that
    is completed only after the last part (LocalStore writes a hidden
    temporary file and renames it). If the producer of a stream raises, the
    upload is abandoned and its exception propagates unchanged.
    """

    def __init__(
        self,
        store: ObjectStore,
        *,
        prefix: str = "",
        label: str = "blob store",
        url: str | None = None,
        chunk_size: int | None = None,
        max_concurrency: int = DEFAULT_MAX_CONCURRENCY,
    ) -> None:
        local = _is_local(store)
        if chunk_size is None:
            chunk_size = LOCAL_CHUNK_SIZE if local else DEFAULT_CHUNK_SIZE
        elif local and chunk_size < MIN_CHUNK_SIZE:
            raise ValueError("chunk_size must be at least 1 MiB")
        elif not local and chunk_size < MIN_REMOTE_CHUNK_SIZE:
            raise ValueError("chunk_size must be at least 5 MiB (the S3 minimum part size)")
        self._store = store
        self._prefix = check_prefix(prefix)
        self._label = label
        root = url if url is not None else describe_store_url(store)
        if url is None and self._prefix:
            root = f"{root}{self._prefix}" if root.endswith("/") else f"{root}/{self._prefix}"
        self._url = root
        self._chunk_size = chunk_size
        self._max_concurrency = max_concurrency
        self._closed = False
        self._local_root: Path | None = None
        from obstore.store import LocalStore

        if isinstance(store, LocalStore):
            self._local_root = Path(store.prefix or "/")
        self._root_text = str(self._local_root or "").rstrip("/")

    # ------------------------------------------------------------ read-only views

    @property
    def chunk_size(self) -> int:
        """The multipart part size: what one put holds before it writes a part."""
        return self._chunk_size

    @property
    def store(self) -> ObjectStore:
        """The underlying obstore store (for FileIO adapters and dataset readers)."""
        return self._store

    @property
    def prefix(self) -> str:
        """The root inside `store`: ``""`` or a checked path without a trailing ``/``."""
        return self._prefix

    @property
    def url(self) -> str:
        """The root as a URL, without credentials."""
        return self._url

    @property
    def label(self) -> str:
        return self._label

    def filesystem(self) -> tuple[Any, str]:
        """An fsspec filesystem over `store` and this store's root in it (`hypaware.blob.fs`).

        On a local directory it refuses a symbolic link below the root with
        the same `PathError` as this store's own operations.
        """
        from hypaware.blob.fs import filesystem

        guard = self.check_key if self._local_root is not None else None
        return filesystem(self.store, self.prefix, guard)

    def check_key(self, key: str, op: str = "access") -> None:
        """`PathError` if `key` (a key in `store`) goes through a symbolic link below a local root.

        For code that reaches `store` directly (the fsspec filesystem of
        `filesystem`, the Iceberg FileIO); a no-op on remote stores, which
        have no links.
        """
        self._no_links(key, op, self._relative(key))

    def key(self, path: str) -> str:
        """The key in `store` for `path`; `PathError` if the path is unsafe."""
        check_path(path)
        return f"{self._prefix}/{path}" if self._prefix else path

    def __repr__(self) -> str:
        return f"ObstoreBlobStore({self._url!r})"

    # ---------------------------------------------------------------- operations

    def _open(self, op: str, path: str | None) -> None:
        if self._closed:
            raise StoreError(
                f"{self._label}: cannot {op}"
                + (f" {path!r}" if path else "")
                + ": store is closed",
                path=path,
            )

    def _no_links(self, key: str, op: str, path: str, checked: set[str] | None = None) -> None:
        """`PathError` if a component of `key` below a local root is a symbolic link.

        Components that do not exist yet are fine: obstore creates them as
        real directories. `checked` remembers directories already found
        clean (one listing checks many keys below the same directories).
        """
        if self._local_root is None:
            return
        root = self._root_text
        walked = ""
        for part in key.split("/"):
            walked = f"{walked}/{part}" if walked else part
            if checked is not None and walked in checked:
                continue
            try:
                # Strings, not Paths: a listing checks every key it yields.
                mode = os.lstat(f"{root}/{walked}").st_mode
            except FileNotFoundError:
                return
            except OSError as exc:
                raise translate_error(exc, label=self._label, op=op, path=path) from exc
            if stat.S_ISLNK(mode):
                raise PathError(
                    f"{self._label}: refusing to {op} {path!r}: {walked!r} below the root "
                    f"{self._url} is a symbolic link, which could lead outside the root",
                    path=path,
                )
            if checked is not None and stat.S_ISDIR(mode):
                checked.add(walked)

    def _relative(self, key: str) -> str:
        if self._prefix and key.startswith(f"{self._prefix}/"):
            return key[len(self._prefix) + 1 :]
        return key

    def _meta(self, raw: Any) -> ObjectMeta:
        return ObjectMeta(
            path=self._relative(raw["path"]),
            size=raw["size"],
            last_modified=raw.get("last_modified"),
            etag=raw.get("e_tag"),
        )

    async def put(
        self,
        path: str,
        data: bytes | Iterable[bytes] | AsyncIterable[bytes],
        *,
        if_absent: bool = False,
    ) -> ObjectMeta:
        """Write an object whole (see `hypaware.core.contracts.BlobStore.put`).

        Up to `chunk_size` bytes go up in one request; more become a
        multipart upload of `chunk_size` parts, completed only after the last
        part. With `if_absent=True` the stores' conditional put is a single
        request, so a stream is gathered in memory first.
        """
        key = self.key(path)
        self._open("write", path)
        import obstore

        op = "create" if if_absent else "write"
        self._no_links(key, op, path)
        mode: Literal["create", "overwrite"] = "create" if if_absent else "overwrite"
        counter = _Counted()
        payload: Any
        if isinstance(data, str):
            raise TypeError(f"{self._label}: data for {path!r} must be bytes, not str")
        if isinstance(data, _BytesLike):
            payload = data
            counter.size = len(memoryview(data).cast("B"))
        elif isinstance(data, AsyncIterable):
            payload = await self._buffer_head(data, counter)
        elif isinstance(data, Iterable):
            payload = self._buffer_head_sync(data, counter)
        else:
            raise TypeError(
                f"{self._label}: data for {path!r} must be bytes or an (async) iterable "
                f"of bytes, got {type(data).__name__}"
            )
        if isinstance(payload, _BytesLike):
            # One request for what fits in a part: multipart would be three.
            use_multipart: bool | None = len(payload) > self._chunk_size
        else:
            use_multipart = None
        try:
            result = await obstore.put_async(
                self._store,
                key,
                payload,
                mode=mode,
                use_multipart=use_multipart,
                chunk_size=self._chunk_size,
                max_concurrency=self._max_concurrency,
            )
        except BaseException as exc:
            if exc is counter.producer_error or not isinstance(exc, Exception):
                raise
            raise translate_error(exc, label=self._label, op=op, path=path) from exc
        return ObjectMeta(path=path, size=counter.size, etag=result.get("e_tag"))

    async def _buffer_head(self, data: AsyncIterable[Any], counter: _Counted) -> Any:
        """Read up to one part: bytes if the stream ends there, else a stream replaying it."""
        it = aiter(data)
        first: list[Any] = []
        size = 0
        while size <= self._chunk_size:
            try:
                chunk = await anext(it)
            except StopAsyncIteration:
                counter.size = size
                return _join(first)
            first.append(chunk)
            size += len(memoryview(chunk).cast("B"))
        counter.size = size
        return counter.prefixed(first, it)

    def _buffer_head_sync(self, data: Iterable[Any], counter: _Counted) -> Any:
        """As `_buffer_head`, for a plain iterable (the producer's errors propagate as is)."""
        it = iter(data)
        first: list[Any] = []
        size = 0
        while size <= self._chunk_size:
            try:
                chunk = next(it)
            except StopIteration:
                counter.size = size
                return _join(first)
            first.append(chunk)
            size += len(memoryview(chunk).cast("B"))
        counter.size = size
        return counter.sync_prefixed(first, it)

    async def get(self, path: str) -> bytes:
        """Read a whole object; `NotFoundError` if missing."""
        key = self.key(path)
        self._open("read", path)
        self._no_links(key, "read", path)
        import obstore

        try:
            result = await obstore.get_async(self._store, key)
            data = await result.bytes_async()
        except Exception as exc:
            raise translate_error(exc, label=self._label, op="read", path=path) from exc
        return data.to_bytes()

    async def get_range(self, path: str, start: int, end: int) -> bytes:
        """Bytes ``[start, end)``, clamped to the object's size like a slice; `NotFoundError`."""
        key = self.key(path)
        self._open("read", path)
        if start < 0 or end < start:
            raise ValueError(f"invalid range [{start}, {end}) for {path!r}")
        self._no_links(key, "read", path)
        if start == end:
            await self.head(path)
            return b""
        import obstore

        try:
            data = await obstore.get_range_async(self._store, key, start=start, end=end)
        except Exception as exc:
            error = translate_error(exc, label=self._label, op="read", path=path)
            if isinstance(error, NotFoundError):
                raise error from exc
            # Stores disagree about a range starting at or past the end (416,
            # "invalid range"): answer like a slice if the object is there.
            meta = await self.head(path)
            if start >= meta.size:
                return b""
            raise error from exc
        return data.to_bytes()

    def list(self, prefix: str = "") -> AsyncIterator[ObjectMeta]:
        """Every object under the directory-like `prefix` (``"a/b"`` lists ``a/b/...``)."""
        check_list_prefix(prefix)
        return self._list(prefix)

    async def _list(self, prefix: str) -> AsyncIterator[ObjectMeta]:
        self._open("list", prefix or None)
        import obstore

        body = prefix.rstrip("/")
        full = "/".join(p for p in (self._prefix, body) if p)
        checked: set[str] = set()
        if full:
            self._no_links(full, "list", prefix, checked)
        try:
            stream = obstore.list(self._store, prefix=full or None)
            async for chunk in stream:
                for raw in chunk:
                    # obstore's local listing follows links; refuse what it found through one.
                    self._no_links(raw["path"], "list", prefix or raw["path"], checked)
                    yield self._meta(raw)
        except Exception as exc:
            raise translate_error(exc, label=self._label, op="list", path=prefix or None) from exc

    async def head(self, path: str) -> ObjectMeta:
        """Metadata of one object; `NotFoundError` if missing."""
        key = self.key(path)
        self._open("read", path)
        self._no_links(key, "read", path)
        import obstore

        try:
            raw = await obstore.head_async(self._store, key)
        except Exception as exc:
            raise translate_error(exc, label=self._label, op="read", path=path) from exc
        return self._meta(raw)

    async def delete(self, path: str) -> None:
        """Remove an object; a missing one is not an error on any store."""
        key = self.key(path)
        self._open("delete", path)
        self._no_links(key, "delete", path)
        import obstore

        try:
            await obstore.delete_async(self._store, key)
        except Exception as exc:
            error = translate_error(exc, label=self._label, op="delete", path=path)
            if isinstance(error, NotFoundError):
                return
            raise error from exc

    async def close(self) -> None:
        """Mark the store closed; obstore releases its connection pool with the store."""
        self._closed = True


# mypy checks the class against the contract here, not only at the call sites.
_: type[BlobStore] = ObstoreBlobStore
