"""The BlobStore contract, the same on every destination (memory, local, S3, Azure, GCS)."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from hypaware.blob.store import ObstoreBlobStore
from hypaware.core.contracts import BlobStore
from hypaware.core.errors import AlreadyExistsError, NotFoundError, PathError, StoreError

from .conftest import StoreMaker

MiB = 1024 * 1024


async def _paths(store: ObstoreBlobStore, prefix: str = "") -> list[str]:
    return sorted([meta.path async for meta in store.list(prefix)])


def test_satisfies_the_protocol(store: ObstoreBlobStore) -> None:
    assert isinstance(store, BlobStore)
    assert "secret" not in store.url.lower()
    assert store.url in store.label
    assert " " not in store.url


async def test_bytes_round_trip_and_head(store: ObstoreBlobStore) -> None:
    meta = await store.put("ds/date=2024-01-02/part-0.bin", b"hello world")
    assert meta.path == "ds/date=2024-01-02/part-0.bin"
    assert meta.size == 11
    assert await store.get("ds/date=2024-01-02/part-0.bin") == b"hello world"
    head = await store.head("ds/date=2024-01-02/part-0.bin")
    assert head.path == "ds/date=2024-01-02/part-0.bin"
    assert head.size == 11
    assert head.last_modified is not None
    assert head.etag


async def test_sync_and_async_iterables_and_empty_objects(store: ObstoreBlobStore) -> None:
    def chunks() -> Iterator[bytes]:
        yield b"abc"
        yield b""
        yield b"def"

    async def achunks() -> AsyncIterator[bytes]:
        for part in (b"12", b"34", b"5"):
            yield part

    assert (await store.put("sync", chunks())).size == 6
    assert (await store.put("async", achunks())).size == 5
    assert (await store.put("empty", b"")).size == 0
    assert (await store.put("empty-iter", iter([]))).size == 0
    assert await store.get("sync") == b"abcdef"
    assert await store.get("async") == b"12345"
    assert await store.get("empty") == b""
    assert (await store.head("empty-iter")).size == 0


async def test_text_is_not_bytes(store: ObstoreBlobStore) -> None:
    with pytest.raises(TypeError, match="not str"):
        await store.put("t", "text")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await store.put("t", 42)  # type: ignore[arg-type]
    assert await _paths(store) == []


async def test_overwrite_replaces_the_object(store: ObstoreBlobStore) -> None:
    await store.put("x", b"first version")
    await store.put("x", b"second")
    assert await store.get("x") == b"second"
    assert await _paths(store) == ["x"]


async def test_ranges_behave_like_slices(store: ObstoreBlobStore) -> None:
    await store.put("r", b"0123456789")
    assert await store.get_range("r", 0, 10) == b"0123456789"
    assert await store.get_range("r", 2, 5) == b"234"
    assert await store.get_range("r", 8, 50) == b"89"
    assert await store.get_range("r", 4, 4) == b""
    assert await store.get_range("r", 10, 12) == b""
    assert await store.get_range("r", 30, 40) == b""
    with pytest.raises(NotFoundError):
        await store.get_range("missing", 0, 4)
    with pytest.raises(ValueError, match="invalid range"):
        await store.get_range("r", 5, 2)


async def test_listing_is_directory_like_and_relative_to_the_root(
    store: ObstoreBlobStore,
) -> None:
    for path in ("a/1", "a/2", "a/b/3", "ab/4", "c"):
        await store.put(path, path.encode())
    assert await _paths(store) == ["a/1", "a/2", "a/b/3", "ab/4", "c"]
    assert await _paths(store, "a") == ["a/1", "a/2", "a/b/3"]
    assert await _paths(store, "a/") == ["a/1", "a/2", "a/b/3"]
    assert await _paths(store, "a/b") == ["a/b/3"]
    assert await _paths(store, "nothing/here") == []
    sizes = {meta.path: meta.size async for meta in store.list("a")}
    assert sizes == {"a/1": 3, "a/2": 3, "a/b/3": 5}


async def test_missing_objects(store: ObstoreBlobStore) -> None:
    with pytest.raises(NotFoundError) as info:
        await store.get("no/such/object")
    assert info.value.path == "no/such/object"
    assert "no/such/object" in str(info.value)
    assert "sink 'archive'" in str(info.value)
    assert isinstance(info.value, FileNotFoundError)
    with pytest.raises(NotFoundError):
        await store.head("no/such/object")
    await store.delete("no/such/object")  # not an error on any store


async def test_delete_removes(store: ObstoreBlobStore) -> None:
    await store.put("d/x", b"1")
    await store.delete("d/x")
    with pytest.raises(NotFoundError):
        await store.get("d/x")
    assert await _paths(store) == []


async def test_if_absent_never_replaces(store: ObstoreBlobStore) -> None:
    await store.put("once", b"original", if_absent=True)
    with pytest.raises(AlreadyExistsError) as info:
        await store.put("once", b"replacement", if_absent=True)
    assert isinstance(info.value, FileExistsError)
    assert "once" in str(info.value)
    with pytest.raises(AlreadyExistsError):
        await store.put("once", iter([b"streamed ", b"replacement"]), if_absent=True)
    assert await store.get("once") == b"original"


@pytest.mark.slow
async def test_large_streamed_object_goes_up_in_parts(store: ObstoreBlobStore) -> None:
    block = bytes(range(256)) * 4096  # 1 MiB
    digest = hashlib.sha256()

    async def stream() -> AsyncIterator[bytes]:
        for i in range(21):
            chunk = bytes([i]) + block[1:]
            digest.update(chunk)
            yield chunk

    meta = await store.put("big/object.bin", stream())
    assert meta.size == 21 * MiB
    assert hashlib.sha256(await store.get("big/object.bin")).digest() == digest.digest()
    assert (await store.head("big/object.bin")).size == 21 * MiB
    tail = await store.get_range("big/object.bin", 20 * MiB, 21 * MiB + 10)
    assert tail[:1] == bytes([20])
    assert len(tail) == MiB


async def test_large_bytes_object(store: ObstoreBlobStore) -> None:
    data = b"z" * (9 * MiB + 3)
    assert (await store.put("bytes-big", data)).size == len(data)
    assert await store.get_range("bytes-big", 9 * MiB, 9 * MiB + 3) == b"zzz"


async def test_failing_producer_leaves_nothing_and_keeps_its_error(
    store: ObstoreBlobStore,
) -> None:
    class Boom(Exception):
        pass

    async def stream() -> AsyncIterator[bytes]:
        yield b"x" * (6 * MiB)
        yield b"y" * (6 * MiB)
        raise Boom("encoder failed")

    def small() -> Iterator[bytes]:
        yield b"abc"
        raise Boom("encoder failed early")

    await store.put("keep", b"old")
    with pytest.raises(Boom):
        await store.put("half", stream())
    with pytest.raises(Boom):
        await store.put("keep", small())
    assert await _paths(store) == ["keep"]
    assert await store.get("keep") == b"old"


@pytest.mark.parametrize(
    "path", ["", "/abs", "a//b", "a/./b", "../up", "a/..", "a\\b", "nul\x00", "trail/"]
)
async def test_unsafe_paths_are_refused_before_io(store: ObstoreBlobStore, path: str) -> None:
    for call in (
        lambda: store.put(path, b"x"),
        lambda: store.get(path),
        lambda: store.head(path),
        lambda: store.delete(path),
        lambda: store.get_range(path, 0, 1),
    ):
        with pytest.raises(PathError):
            await call()
    assert await _paths(store) == []


async def test_list_prefix_is_checked_too(store: ObstoreBlobStore) -> None:
    for prefix in ("../", "/", "a/../b", "a\\b"):
        with pytest.raises(PathError):
            store.list(prefix)


async def test_close_is_idempotent_and_final(make_store: StoreMaker) -> None:
    store = make_store()
    await store.put("p", b"1")
    await store.close()
    await store.close()
    with pytest.raises(StoreError, match="closed"):
        await store.get("p")
    with pytest.raises(StoreError, match="closed"):
        await store.put("p", b"2")
    with pytest.raises(StoreError, match="closed"):
        [m async for m in store.list()]


async def test_pyarrow_dataset_reads_through_the_same_store(store: ObstoreBlobStore) -> None:
    import io

    import pyarrow as pa
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    for day, values in (("2024-01-01", [1, 2]), ("2024-01-02", [3])):
        buf = io.BytesIO()
        pq.write_table(pa.table({"x": values}), buf)
        await store.put(f"events/date={day}/part-0.parquet", buf.getvalue())
    fs, root = store.filesystem()
    dataset = ds.dataset(f"{root}/events", filesystem=fs, format="parquet", partitioning="hive")
    table = dataset.to_table(filter=ds.field("date") == "2024-01-02")
    assert table.to_pydict() == {"x": [3], "date": ["2024-01-02"]}
    assert dataset.count_rows() == 3


@pytest.mark.parametrize(
    "path",
    [
        "events/date=2024-01-02/part-0.parquet",
        "a%2Fb/%2E%2E/x%25y",
        "sp ace/ü/c+d/~x/a=b",
        "q?x/h#frag/semi;colon/comma,",
        "%C3%A9t%C3%A9/%20",
    ],
)
async def test_unusual_but_valid_paths_round_trip_verbatim(
    store: ObstoreBlobStore, path: str
) -> None:
    await store.put(path, path.encode())
    assert await store.get(path) == path.encode()
    assert await _paths(store) == [path]
    assert (await store.head(path)).path == path
    await store.delete(path)
    assert await _paths(store) == []


def test_part_size_defaults_and_minimums_follow_the_kind_of_store(tmp_path: Path) -> None:
    from obstore.store import LocalStore, MemoryStore, S3Store

    remote = S3Store("bucket", region="us-east-1", skip_signature=True)
    # Local and memory stores take a part without a request: small parts
    # bound what a streamed put holds.
    assert ObstoreBlobStore(MemoryStore()).chunk_size == 2 * MiB
    assert ObstoreBlobStore(LocalStore(tmp_path)).chunk_size == 2 * MiB
    assert ObstoreBlobStore(remote).chunk_size == 8 * MiB
    assert ObstoreBlobStore(MemoryStore(), chunk_size=MiB).chunk_size == MiB
    with pytest.raises(ValueError, match="at least 1 MiB"):
        ObstoreBlobStore(MemoryStore(), chunk_size=MiB - 1)
    with pytest.raises(ValueError, match="S3 minimum"):
        ObstoreBlobStore(remote, chunk_size=4 * MiB)
