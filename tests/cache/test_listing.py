"""Listing a sealed directory: passing over old segments by their seq prefix finds what matching
every name finds."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from hypaware.cache.index import INDEX_NAME
from hypaware.cache.layout import SEGMENT_NAME
from hypaware.cache.reads import sealed_names


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
    assert cache._refs == {}
