"""A pyiceberg `FileIO` over the sink's blob store (an obstore store plus a root prefix).

pyiceberg builds a FileIO from catalog properties alone (``py-io-impl``), so
the live store is handed over through a registry of roots: `register_root`
returns a token that goes into the catalog properties, and `ObstoreFileIO`
looks its root up by that token. Locations are full URLs under the root's
URL (``s3://bucket/prefix/ns/table/metadata/...``); anything else is refused,
and on a local directory so is a path through a symbolic link below the root
(the blob store's own check), so no file is read or written outside the
sink's destination.

Errors keep the types pyiceberg relies on: a missing object is a
`FileNotFoundError` and "already exists" a `FileExistsError` (our
`NotFoundError` / `AlreadyExistsError` are both).
"""

from __future__ import annotations

import io
import itertools
import threading
from collections.abc import Callable
from types import TracebackType
from typing import Any

import attrs
import obstore
from pyiceberg.io import FileIO, InputFile, InputStream, OutputFile, OutputStream
from pyiceberg.typedef import EMPTY_DICT, Properties

from hypaware.blob.errors import translate_error
from hypaware.core.errors import StoreError

__all__ = [
    "IO_IMPL",
    "TOKEN_PROPERTY",
    "ObstoreFileIO",
    "ObstoreInputFile",
    "StoreRoot",
    "register_root",
    "unregister_root",
    "with_vended_credentials",
]

IO_IMPL = "hypaware.iceberg.fileio.ObstoreFileIO"
TOKEN_PROPERTY = "hypaware.fileio-root"

# Reads of Parquet column chunks are large and few; metadata files are small.
_READ_BUFFER = 4 * 1024 * 1024


@attrs.frozen
class StoreRoot:
    """An obstore store, the key prefix of the sink's root in it, and that root's URL.

    `guard` is the blob store's own key check (`ObstoreBlobStore.check_key`):
    on a local directory it refuses a symbolic link below the root, so table
    files are never written or read through one.
    """

    store: Any
    prefix: str
    url: str
    label: str
    guard: Callable[[str, str], None] | None = None

    def key(self, location: str, op: str = "read") -> str:
        """The store key for a location under `url`; `StoreError` for any other location.

        `op` names the operation in the `PathError` for a refused link.
        """
        base = self.url.rstrip("/")
        if not location.startswith(base + "/"):
            raise StoreError(
                f"{self.label}: location {location!r} is outside the destination {self.url!r}",
                path=location,
            )
        rest = location[len(base) + 1 :]
        if not rest or rest.startswith("/") or any(p in ("", ".", "..") for p in rest.split("/")):
            raise StoreError(f"{self.label}: location {location!r} is not a plain path")
        key = f"{self.prefix}/{rest}" if self.prefix else rest
        if self.guard is not None:
            self.guard(key, op)
        return key


_ROOTS: dict[str, StoreRoot] = {}
_LOCK = threading.Lock()
_COUNTER = itertools.count(1)


def register_root(root: StoreRoot) -> str:
    """Make `root` reachable from catalog properties; returns the token to put there."""
    with _LOCK:
        token = f"root-{next(_COUNTER)}"
        _ROOTS[token] = root
    return token


def unregister_root(token: str) -> None:
    with _LOCK:
        _ROOTS.pop(token, None)


class _Reader:
    """A seekable binary stream over one object, reading ranges on demand."""

    def __init__(self, root: StoreRoot, location: str, key: str, size: int | None) -> None:
        self._location = location
        self._root = root
        try:
            self._file = obstore.open_reader(root.store, key, buffer_size=_READ_BUFFER, size=size)
        except Exception as exc:
            raise translate_error(exc, label=root.label, op="read", path=location) from exc
        self.closed = False

    def read(self, size: int = -1) -> bytes:
        try:
            if size is None or size < 0:
                return self._file.readall().to_bytes()
            return self._file.read(size).to_bytes()
        except Exception as exc:
            raise translate_error(
                exc, label=self._root.label, op="read", path=self._location
            ) from exc

    def readall(self) -> bytes:
        return self.read(-1)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return int(self._file.seek(offset, whence))

    def tell(self) -> int:
        return int(self._file.tell())

    def seekable(self) -> bool:
        return True

    def readable(self) -> bool:
        return True

    def writable(self) -> bool:
        return False

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._file.close()

    def __enter__(self) -> _Reader:
        return self

    def __exit__(
        self,
        exctype: type[BaseException] | None,
        excinst: BaseException | None,
        exctb: TracebackType | None,
    ) -> None:
        self.close()


class _Writer:
    """Buffers a small object (metadata, manifests) and puts it whole on close."""

    def __init__(self, root: StoreRoot, location: str, key: str, overwrite: bool) -> None:
        self._root = root
        self._location = location
        self._key = key
        self._overwrite = overwrite
        self._buffer = io.BytesIO()
        self.closed = False

    def write(self, b: bytes) -> int:
        return self._buffer.write(b)

    def tell(self) -> int:
        return self._buffer.tell()

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        op = "write" if self._overwrite else "create"
        try:
            obstore.put(
                self._root.store,
                self._key,
                self._buffer.getvalue(),
                mode="overwrite" if self._overwrite else "create",
            )
        except Exception as exc:
            raise translate_error(exc, label=self._root.label, op=op, path=self._location) from exc

    def __enter__(self) -> _Writer:
        return self

    def __exit__(
        self,
        exctype: type[BaseException] | None,
        excinst: BaseException | None,
        exctb: TracebackType | None,
    ) -> None:
        if exctype is None:
            self.close()
        else:
            self.closed = True  # an object half-written by a failed producer is never put


class ObstoreInputFile(InputFile):
    """One object to read; `size`, when the caller knows it, saves a HEAD request."""

    def __init__(self, root: StoreRoot, location: str, size: int | None = None) -> None:
        super().__init__(location)
        self._root = root
        self._key = root.key(location)
        self._size: int | None = size

    def __len__(self) -> int:
        if self._size is None:
            try:
                self._size = int(obstore.head(self._root.store, self._key)["size"])
            except Exception as exc:
                raise translate_error(
                    exc, label=self._root.label, op="read", path=self.location
                ) from exc
        return self._size

    def exists(self) -> bool:
        try:
            len(self)
        except FileNotFoundError:
            return False
        return True

    def open(self, seekable: bool = True) -> InputStream:
        return _Reader(self._root, self.location, self._key, self._size)


class ObstoreOutputFile(OutputFile):
    def __init__(self, root: StoreRoot, location: str) -> None:
        super().__init__(location)
        self._root = root
        self._key = root.key(location, "write")

    def __len__(self) -> int:
        return len(self.to_input_file())

    def exists(self) -> bool:
        return self.to_input_file().exists()

    def to_input_file(self) -> ObstoreInputFile:
        return ObstoreInputFile(self._root, self.location)

    def create(self, overwrite: bool = False) -> OutputStream:
        return _Writer(self._root, self.location, self._key, overwrite)


# Credentials a REST catalog vends with a table (Iceberg's FileIO property names)
# and the obstore S3 config keys they become.
_VENDED_S3 = {
    "s3.access-key-id": "access_key_id",
    "s3.secret-access-key": "secret_access_key",
    "s3.session-token": "token",
    "s3.region": "region",
    "s3.endpoint": "endpoint",
}


def with_vended_credentials(root: StoreRoot, properties: Properties) -> StoreRoot:
    """`root` reaching its store with the credentials a catalog vended, if it vended any.

    Only S3 credentials are taken (``s3.access-key-id`` and friends); the
    bucket and prefix stay the destination's, so files still cannot leave it.
    """
    vended = {ours: str(properties[key]) for key, ours in _VENDED_S3.items() if key in properties}
    from obstore.store import S3Store

    if "access_key_id" not in vended or not isinstance(root.store, S3Store):
        return root

    store = root.store
    config: Any = {**store.config, **vended}
    if "token" not in vended:
        config.pop("token", None)  # a session token belongs to the keys it came with
    fresh = S3Store(
        config=config,
        prefix=store.prefix,
        client_options=store.client_options,
        retry_config=store.retry_config,
    )
    return attrs.evolve(root, store=fresh, label=f"{root.label} (catalog-vended credentials)")


class ObstoreFileIO(FileIO):
    """pyiceberg's FileIO over a registered `StoreRoot` (see `register_root`).

    When the catalog vends S3 credentials with a table (a REST catalog's
    ``config``), they replace the destination's own for that table's files.
    """

    def __init__(self, properties: Properties = EMPTY_DICT) -> None:
        super().__init__(properties)
        token = properties.get(TOKEN_PROPERTY)
        with _LOCK:
            root = _ROOTS.get(token) if token else None
        if root is None:
            raise ValueError(
                f"ObstoreFileIO needs the {TOKEN_PROPERTY!r} property naming a registered "
                "store root; it is created by @hypaware/format-iceberg"
            )
        self.root = with_vended_credentials(root, properties)

    def new_input(self, location: str) -> InputFile:
        return ObstoreInputFile(self.root, location)

    def new_output(self, location: str) -> OutputFile:
        return ObstoreOutputFile(self.root, location)

    def delete(self, location: str | InputFile | OutputFile) -> None:
        path = location if isinstance(location, str) else location.location
        key = self.root.key(path, "delete")
        try:
            obstore.delete(self.root.store, key)
        except FileNotFoundError:
            return
        except Exception as exc:
            error = translate_error(exc, label=self.root.label, op="delete", path=path)
            if isinstance(error, FileNotFoundError):
                return
            raise error from exc
