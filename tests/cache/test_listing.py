"""Listing a sealed directory: passing over old segments by their seq prefix finds what matching
every name finds."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from hypaware.cache.directory import SEGMENT_NAME
from hypaware.cache.index import INDEX_NAME
from hypaware.cache.listing import SealedListing, Segment
from hypaware.cache.local import LocalCache
from hypaware.cache.reads import sealed_names
from hypaware.core.types import DatasetInfo, PartitionRef


def every_name_matched(
    entries: list[str], after: int, pending: int | None
) -> tuple[list[tuple[int, str]], list[str]]:
    """The rule stated plainly: match every name, then compare its seq."""
    segments = [(int(m.group(1)), e) for e in entries if (m := SEGMENT_NAME.match(e))]
    found = [(s, e) for s, e in segments if s > after and (pending is None or s < pending)]
    indexes = [e for e in entries if not SEGMENT_NAME.match(e) and INDEX_NAME.match(e)]
    return found, indexes


# Seqs near each other, so `after` and `pending` fall among them; a few past 12 digits.
seqs = st.one_of(st.integers(0, 40), st.integers(0, 10**13))
keys = st.text("abcXYZ019_-.", min_size=0, max_size=6)
segment_names = st.builds(
    lambda seq, key, suffix: f"{seq:012d}-{key}{suffix}",
    seqs,
    keys,
    st.sampled_from([".arrow", ".parquet", ".arrow.tmp", ".json", ""]),
)
index_names = st.builds(lambda a, b: f".index-{a:012d}-{b:012d}.json", seqs, seqs)
other_names = st.one_of(
    st.text(max_size=20),
    st.builds(lambda seq, tail: f"{seq}{tail}", seqs, st.sampled_from(["-a.arrow", ".", ""])),
)
names = st.lists(st.one_of(segment_names, index_names, other_names), max_size=40)


@given(names, st.one_of(seqs, st.integers(-5, -1)), st.none() | seqs)
def test_the_prefix_pass_over_finds_what_matching_every_name_finds(
    entries: list[str], after: int, pending: int | None
) -> None:
    assert sealed_names(entries, after, pending) == every_name_matched(entries, after, pending)


def test_old_segments_are_passed_over_and_new_ones_and_indexes_found() -> None:
    entries = [
        "000000000001-a.arrow",
        "000000000005-b.parquet",
        "000000000006-c.arrow",
        "000000000009-d.arrow",
        ".index-000000000001-000000000006.json",
        "000000000007.stray",
    ]
    found, indexes = sealed_names(entries, after=5, pending=9)
    assert found == [(6, "000000000006-c.arrow")]
    assert indexes == [".index-000000000001-000000000006.json"]


def test_a_listing_hands_back_the_refs_it_made_before_until_they_are_dropped(
    tmp_path: Path,
) -> None:
    from datetime import timedelta

    from tests.driver.helpers import make_cache

    clock = [datetime(2026, 1, 1, tzinfo=UTC)]
    cache = make_cache(tmp_path / "c", count=5, clock=lambda: clock[0])
    first = cache.ready_partitions("events")
    again = cache.ready_partitions("events")
    assert [a is b for a, b in zip(first, again, strict=True)] == [True] * len(first)
    assert again[0].open().read_all().num_rows == first[0].row_count

    # Dropped by retention: its ref goes with it.
    cache.retention = timedelta(hours=1)
    clock[0] += timedelta(days=1)
    cache.enforce_retention({})
    assert cache.ready_partitions("events") == []
    assert cache._reader._listings["events"].refs == []
    assert cache._reader._segments == {}


# ---------------------------------------------------------------- the kept listing


def _segment(seq: int, name: str) -> Segment:
    t = datetime(2026, 1, 1, tzinfo=UTC)
    return Segment(seq, name.split(".")[0], Path("/c/sealed") / name, seq, 1, t, t, t)


def _ref(info: DatasetInfo, segment: Segment) -> PartitionRef:
    return PartitionRef(
        id=segment.id, dataset=info.name, seq=segment.seq, row_count=segment.row_count
    )


# A directory's states one after another: each a set of segment seqs (names from them).
states = st.lists(st.sets(st.integers(0, 30), max_size=12), min_size=1, max_size=8)


@given(states, st.integers(-1, 31), st.none() | st.integers(0, 31))
def test_a_kept_listing_matches_one_made_afresh_after_any_changes(
    history: list[set[int]], after: int, before: int | None
) -> None:
    info = DatasetInfo(name="events", schema=pa.schema([("a", pa.int64())]), time_column="a")
    listing = SealedListing()
    for seqs in history:
        entries = [f"{seq:012d}-k.arrow" for seq in seqs] + [".index-x.json", "stray"]
        added, removed = listing.changes(entries)
        listing.forget(removed)
        listing.add([_segment(int(e[:12]), e) for e in added if e[0].isdigit()], info, _ref)
        listing.names.update(added)
        expected = sorted(s for s in seqs if s > after and (before is None or s < before))
        assert [r.seq for r in listing.between(after, before)] == expected
        assert [r.id for r in listing.refs] == [s.id for s in listing.segments]


def test_another_writers_seals_and_drops_show_in_the_next_listing(tmp_path: Path) -> None:
    from datetime import timedelta

    from tests.driver.helpers import make_cache, rows

    clock = [datetime(2026, 1, 1, tzinfo=UTC)]
    reader = make_cache(tmp_path / "c", count=0, clock=lambda: clock[0])
    reader.append("events", rows(0, 3, convs=1))
    reader.seal()
    assert [p.row_count for p in reader.ready_partitions("events")] == [3]

    writer = LocalCache(tmp_path / "c", fsync=False, clock=lambda: clock[0])
    clock[0] += timedelta(hours=2)
    writer.append("events", rows(3, 4, convs=1))
    writer.seal()
    listed = reader.ready_partitions("events")
    assert [p.row_count for p in listed] == [3, 4]
    assert [p.row_count for p in reader.ready_partitions("events", after=listed[0].seq)] == [4]

    # The writer's retention drops the older one; the reader's listing loses it too.
    writer.retention = timedelta(hours=1)
    writer.enforce_retention({})
    assert [p.row_count for p in reader.ready_partitions("events")] == [4]
    assert reader.partition("events", listed[0].id) is None


def test_a_segment_not_readable_yet_is_listed_once_it_is(tmp_path: Path) -> None:
    from tests.driver.helpers import make_cache, rows

    cache = make_cache(tmp_path / "c", count=0)
    cache.append("events", rows(0, 3, convs=1))
    cache.seal()
    sealed = tmp_path / "c" / "events" / "sealed"
    (segment,) = sorted(sealed.glob("*.arrow"))
    cache.append("events", rows(3, 4, convs=1))
    cache.seal()
    second = next(p for p in sorted(sealed.glob("*.arrow")) if p != segment)
    held = second.read_bytes()
    # Between the listing and reading its metadata the segment goes (renamed away, say).
    listing = LocalCache(tmp_path / "c", fsync=False)
    real = listing._reader.segment
    vanished: list[Path] = []

    def vanish_once(path: Path, *, hint: dict[str, object] | None = None) -> Segment | None:
        if path == second and not vanished:
            vanished.append(path)
            path.unlink()
        return real(path, hint=hint)

    listing._reader.segment = vanish_once  # type: ignore[method-assign]
    assert [p.row_count for p in listing.ready_partitions("events")] == [3]
    second.write_bytes(held)
    assert [p.row_count for p in listing.ready_partitions("events")] == [3, 4]
