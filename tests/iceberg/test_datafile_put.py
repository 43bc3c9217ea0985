"""A data file smaller than one upload part is put in one request; a bigger one streams."""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import obstore
import pytest
from obstore.store import MemoryStore

from hypaware.encoding.parquet import ParquetEncoder
from hypaware.iceberg import datafiles
from hypaware.iceberg.datafiles import PUT_CHUNK_SIZE, DataFileWriter
from hypaware.iceberg.fileio import StoreRoot

pytestmark = pytest.mark.iceberg


class Calls:
    def __init__(self) -> None:
        self.kinds: list[str] = []
        self.real = obstore.put

    def put(self, store: Any, key: str, file: Any, **kwargs: Any) -> Any:
        self.kinds.append("bytes" if isinstance(file, bytes) else "stream")
        assert kwargs.get("use_multipart") is (False if isinstance(file, bytes) else None)
        return self.real(store, key, file, **kwargs)


def writer() -> tuple[DataFileWriter, MemoryStore]:
    store = MemoryStore()
    root = StoreRoot(store=store, prefix="", url="memory://lake", label="memory")
    return DataFileWriter(root, ParquetEncoder(), "lake"), store


@pytest.mark.parametrize(
    ("sizes", "kind"),
    [
        ([], "bytes"),
        ([10, 20, 30], "bytes"),
        ([PUT_CHUNK_SIZE], "bytes"),
        ([PUT_CHUNK_SIZE // 2, PUT_CHUNK_SIZE // 2 + 1], "stream"),
        ([PUT_CHUNK_SIZE + 1, 5], "stream"),
        ([1024 * 1024] * 20, "stream"),
    ],
)
def test_a_file_is_put_whole_once_and_in_one_request_when_it_fits_one_part(
    monkeypatch: pytest.MonkeyPatch, sizes: list[int], kind: str
) -> None:
    calls = Calls()
    monkeypatch.setattr(datafiles.obstore, "put", calls.put)
    files, store = writer()
    chunks = [os.urandom(n) for n in sizes]
    size, tail = files.put("t/data/f.parquet", "memory://lake/t/data/f.parquet", iter(chunks))
    assert calls.kinds == [kind]
    data = b"".join(chunks)
    assert size == len(data)
    assert bytes(obstore.get(store, "t/data/f.parquet").bytes()) == data
    assert data.endswith(tail)


def test_an_encoder_that_fails_before_the_first_part_is_full_puts_nothing() -> None:
    files, store = writer()

    def failing() -> Iterator[bytes]:
        yield b"x" * 100
        raise ValueError("the encoder broke")

    with pytest.raises(ValueError, match="the encoder broke"):
        files.put("t/data/f.parquet", "memory://lake/t/data/f.parquet", failing())
    assert list(obstore.list(store)) == []
