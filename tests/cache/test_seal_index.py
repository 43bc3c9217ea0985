"""Seal indexes: listing new segments without opening them, and every way back to the files."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

import hypaware.cache.reads as reads
from hypaware.cache.index import INDEX_NAME, index_name, stale_indexes
from hypaware.cache.local import LocalCache
from hypaware.core.errors import CacheError
from tests.driver.helpers import make_cache, rows


def _indexes(path: Path) -> list[str]:
    return sorted(
        p.name for p in (path / "events" / "sealed").iterdir() if INDEX_NAME.match(p.name)
    )


def _described(cache: LocalCache) -> list[tuple[object, ...]]:
    return [
        (p.id, p.seq, p.row_count, p.min_time, p.max_time, p.byte_size)
        for p in cache.ready_partitions("events")
    ]


def _no_segment_opened(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    opened: list[Path] = []
    real = reads._read_meta

    def spy(path: Path) -> tuple[int | None, bytes | None]:
        opened.append(path)
        return real(path)

    monkeypatch.setattr(reads, "_read_meta", spy)
    return opened


@pytest.mark.parametrize("segment_format", ["arrow", "parquet"])
def test_new_segments_are_listed_from_the_index_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, segment_format: str
) -> None:
    writer = make_cache(tmp_path, count=0, segment_format=segment_format)
    writer.append("events", rows(0, 30))
    first = writer.seal()
    writer.append("events", rows(30, 30))
    second = writer.seal()
    assert _indexes(tmp_path) == [
        index_name(p.seq for p in first),
        index_name(p.seq for p in second),
    ]
    expected = [
        (p.id, p.seq, p.row_count, p.min_time, p.max_time, p.byte_size) for p in first + second
    ]
    opened = _no_segment_opened(monkeypatch)
    assert _described(LocalCache(tmp_path, fsync=False)) == expected
    assert opened == []
    monkeypatch.undo()
    # The same description from the segments themselves, with no index at all.
    for name in _indexes(tmp_path):
        (tmp_path / "events" / "sealed" / name).unlink()
    opened = _no_segment_opened(monkeypatch)
    assert _described(LocalCache(tmp_path, fsync=False)) == expected
    assert len(opened) == len(expected)


def test_a_damaged_index_is_skipped_with_a_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    make_cache(tmp_path, count=20)
    expected = _described(LocalCache(tmp_path, fsync=False))
    (name,) = _indexes(tmp_path)
    (tmp_path / "events" / "sealed" / name).write_bytes(b'{"version": 1, "segm')
    with caplog.at_level(logging.WARNING, logger="hypaware.cache.local"):
        assert _described(LocalCache(tmp_path, fsync=False)) == expected
    assert f"cache index {tmp_path / 'events' / 'sealed' / name} skipped" in caplog.text


def test_an_entry_that_disagrees_with_its_file_is_not_trusted(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, count=20)
    parts = cache.ready_partitions("events")
    victim = tmp_path / "events" / "sealed" / f"{parts[0].id}.arrow"
    victim.write_bytes(b"not the segment its seal wrote")
    fresh = LocalCache(tmp_path, fsync=False)
    assert [p.id for p in fresh.ready_partitions("events")] == [p.id for p in parts[1:]]
    assert fresh.stats.corrupt_segments == 1


def test_retention_removes_an_index_with_its_last_segment(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, count=0, retention=None)
    cache.append("events", rows(0, 20))
    first = cache.seal()
    cache.append("events", rows(20, 20))
    second = cache.seal()
    # A cap just under what is sealed drops the oldest partitions first.
    cache.max_bytes = sum(p.byte_size for p in second) + first[-1].byte_size
    cache.enforce_retention({})
    assert _indexes(tmp_path) == [
        index_name(p.seq for p in first),
        index_name(p.seq for p in second),
    ]
    cache.max_bytes = sum(p.byte_size for p in second)
    cache.enforce_retention({})
    assert _indexes(tmp_path) == [index_name(p.seq for p in second)]
    assert [p.id for p in LocalCache(tmp_path).ready_partitions("events")] == [p.id for p in second]


def test_an_index_that_cannot_be_written_costs_only_time(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    cache = make_cache(tmp_path, count=0)
    cache.append("events", rows(0, 20))

    def full(_self: Path, _data: bytes) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(Path, "write_bytes", full)
    with caplog.at_level(logging.WARNING, logger="hypaware.cache.local"):
        sealed = cache.seal()
    monkeypatch.undo()
    assert "not written (" in caplog.text and "No space left" in caplog.text
    assert _indexes(tmp_path) == []
    assert not [p for p in (tmp_path / "events" / "sealed").iterdir() if p.name.startswith(".tmp")]
    assert [p.id for p in LocalCache(tmp_path).ready_partitions("events")] == [p.id for p in sealed]


@given(
    st.lists(st.tuples(st.integers(1, 60), st.integers(0, 5)), max_size=8),
    st.sets(st.integers(1, 70), max_size=20),
)
def test_an_index_is_stale_exactly_when_no_seq_of_its_range_is_left(
    ranges: list[tuple[int, int]], live: set[int]
) -> None:
    names = [index_name([lo, lo + width]) for lo, width in ranges]
    stale = set(stale_indexes([*names, "000000000001-x.arrow"], live))
    for (lo, width), name in zip(ranges, names, strict=True):
        assert (name in stale) == (not any(lo <= s <= lo + width for s in live))


def test_damage_that_keeps_the_size_shows_when_the_rows_are_read(tmp_path: Path) -> None:
    cache = make_cache(tmp_path, count=20)
    victim = cache.ready_partitions("events")[0]
    path = tmp_path / "events" / "sealed" / f"{victim.id}.arrow"
    path.write_bytes(b"\0" * path.stat().st_size)
    fresh = LocalCache(tmp_path, fsync=False)
    listed = {p.id: p for p in fresh.ready_partitions("events")}
    with pytest.raises(CacheError, match=f"cache segment {path} cannot be read"):
        listed[victim.id].open().read_all()
