"""Path rules and the encoding of names that come from data."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypaware.core.errors import PathError
from hypaware.core.paths import (
    MAX_SEGMENT_BYTES,
    check_list_prefix,
    check_path,
    check_prefix,
    decode_segment,
    encode_segment,
    join_path,
)

SAFE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~%")
names = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=60)


@pytest.mark.parametrize(
    "path",
    [
        "a",
        "a/b/c.parquet",
        "ds/date=2024-01-01/part-00.parquet",
        "é/ü",
        "a b",
        "x%2F",
        "...",
        "a.",
        ".hidden",
        "a#b",
        "a#1x",
    ],
)
def test_plain_relative_paths_pass_unchanged(path: str) -> None:
    assert check_path(path) == path


@pytest.mark.parametrize(
    ("path", "reason"),
    [
        ("", "empty"),
        ("/etc/passwd", "absolute"),
        ("a//b", "empty segment"),
        ("a/", "empty segment"),
        (".", "'.' segment"),
        ("a/./b", "'.' segment"),
        ("..", "'..' segment"),
        ("a/../../b", "'..' segment"),
        ("a\\..\\b", "backslash"),
        ("C:\\x", "backslash"),
        ("a\x00b", "U+0000"),
        ("a\nb", "U+000A"),
        ("a\x7f", "U+007F"),
        ("a\u2028", "U+2028"),
        ("a\ud800", "surrogate"),
        ("x/part#12", "#<digits>"),
        ("a" * 256, "255 bytes"),
        ("/".join(["a" * 200] * 6), "1024 bytes"),
    ],
)
def test_unsafe_paths_are_refused_with_the_reason(path: str, reason: str) -> None:
    with pytest.raises(PathError, match="refused") as info:
        check_path(path)
    assert reason in str(info.value)
    assert info.value.path == path


def test_non_strings_are_refused() -> None:
    with pytest.raises(PathError, match="must be a string"):
        check_path(b"a")  # type: ignore[arg-type]


def test_prefixes() -> None:
    assert check_prefix("") == ""
    assert check_prefix("exports/") == "exports"
    assert check_prefix("a/b") == "a/b"
    for bad in ("/", "/abs", "a//b", "../x", "a/..", "a\\b"):
        with pytest.raises(PathError):
            check_prefix(bad)
    assert check_list_prefix("") == ""
    assert check_list_prefix("a/") == "a/"
    for bad in ("/", "../", "a//"):
        with pytest.raises(PathError):
            check_list_prefix(bad)


def test_join_path_checks_the_result() -> None:
    assert join_path("a", "b/c") == "a/b/c"
    with pytest.raises(PathError):
        join_path("a", "..", "b")


@pytest.mark.parametrize(
    ("name", "segment"),
    [
        ("conversations", "conversations"),
        (".", "%2E"),
        ("..", "%2E%2E"),
        ("a/b", "a%2Fb"),
        ("a\\b", "a%5Cb"),
        ("100%", "100%25"),
        ("x=1", "x%3D1"),
        ("é", "%C3%A9"),
        ("part#1", "part%231"),
        ("\x00", "%00"),
    ],
)
def test_encoding_examples(name: str, segment: str) -> None:
    assert encode_segment(name) == segment
    assert decode_segment(segment) == name


def test_names_that_cannot_be_segments() -> None:
    with pytest.raises(PathError, match="empty"):
        encode_segment("")
    with pytest.raises(PathError, match="Unicode"):
        encode_segment("\udc80")
    with pytest.raises(PathError, match="255"):
        encode_segment("é" * 50)


@pytest.mark.parametrize("segment", ["", "a/b", "%2f", "%41", "%C3", "a%", "a%zz", "é"])
def test_decode_refuses_what_encode_never_makes(segment: str) -> None:
    with pytest.raises(PathError):
        decode_segment(segment)


@given(names)
def test_encoding_is_a_safe_reversible_segment(name: str) -> None:
    try:
        segment = encode_segment(name)
    except PathError:
        assert len(name.encode()) * 3 > MAX_SEGMENT_BYTES
        return
    assert set(segment) <= SAFE
    assert segment not in (".", "..")
    assert check_path(segment) == segment
    assert decode_segment(segment) == name
    assert encode_segment(name) == segment  # deterministic


@given(names, names)
def test_distinct_names_get_distinct_segments(a: str, b: str) -> None:
    if a != b:
        with contextlib.suppress(PathError):
            assert encode_segment(a) != encode_segment(b)


@given(st.lists(names.map(lambda n: n[:20]), min_size=1, max_size=5))
def test_a_path_of_encoded_segments_is_always_accepted(parts: list[str]) -> None:
    path = "/".join(encode_segment(p) for p in parts)
    assert check_path(path) == path


def _byte_by_byte_encoding(name: str) -> str:
    # The encoding as it was written out before the standard library took over.
    keep = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")
    return "".join(chr(b) if chr(b) in keep else f"%{b:02X}" for b in name.encode("utf-8"))


@given(st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=80))
def test_encoding_is_unchanged_by_the_standard_library(name: str) -> None:
    expected = "%2E" * len(name) if name in (".", "..") else _byte_by_byte_encoding(name)
    if len(expected) > MAX_SEGMENT_BYTES:
        with pytest.raises(PathError, match="255"):
            encode_segment(name)
    else:
        assert encode_segment(name) == expected
