"""Path safety for blob stores.

Every path a blob store sees is ``/``-separated and relative to the store's
root. `check_path` refuses, before any I/O, anything that is not plainly a
path under the root: empty, absolute, an empty / ``.`` / ``..`` segment,
backslashes, NUL and other control characters. It never rewrites a path:
what is accepted is what gets written.

Names that come from data (a dataset name, a partition value) are not paths.
`encode_segment` turns any such name into one safe segment, reversibly
(`decode_segment`) and deterministically: characters outside
``A-Z a-z 0-9 - _ . ~`` are percent-encoded as UTF-8, the way Hive-style
readers (pyarrow, DuckDB, Spark) decode partition values.
"""

from __future__ import annotations

import re
from urllib.parse import quote

from hypaware.core.errors import PathError

__all__ = [
    "MAX_PATH_BYTES",
    "MAX_SEGMENT_BYTES",
    "check_list_prefix",
    "check_path",
    "check_prefix",
    "decode_segment",
    "encode_segment",
    "join_path",
]

# Most filesystems cap a name at 255 bytes and S3 caps a key at 1024: refusing
# here gives the same answer on every store instead of a late backend error.
MAX_SEGMENT_BYTES = 255
MAX_PATH_BYTES = 1024

# C0 and C1 controls, DEL, and the Unicode line/paragraph separators that
# render as line breaks in logs.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
# LocalStore writes an object through a temporary "<name>#<n>" and hides such
# names from listings, so an object named like that would vanish there.
_STAGING_NAME = re.compile(r"#\d+$")
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.~")
_PERCENT = re.compile(r"%([0-9A-F]{2})")


def _refuse(path: str, why: str, *, what: str = "path") -> PathError:
    return PathError(f"{what} {path!r} is refused: {why}", path=path)


def _check_segments(path: str, what: str) -> None:
    for segment in path.split("/"):
        if segment == "":
            raise _refuse(path, "it has an empty segment ('//' or a trailing '/')", what=what)
        if segment in (".", ".."):
            raise _refuse(path, f"it has a {segment!r} segment", what=what)
        if _STAGING_NAME.search(segment):
            raise _refuse(
                path,
                f"segment {segment!r} ends in '#<digits>', which the local store "
                "reserves for writes in progress",
                what=what,
            )
        if len(segment.encode("utf-8")) > MAX_SEGMENT_BYTES:
            raise _refuse(path, f"a segment is longer than {MAX_SEGMENT_BYTES} bytes", what=what)


def _check_text(path: object, what: str) -> str:
    if not isinstance(path, str):
        raise PathError(f"{what} must be a string, got {type(path).__name__}")
    if "\\" in path:
        raise _refuse(path, "it contains a backslash", what=what)
    match = _CONTROL.search(path)
    if match:
        raise _refuse(
            path, f"it contains the control character U+{ord(match.group()):04X}", what=what
        )
    try:
        size = len(path.encode("utf-8"))
    except UnicodeEncodeError:
        raise _refuse(path, "it is not valid Unicode (a lone surrogate)", what=what) from None
    if size > MAX_PATH_BYTES:
        raise _refuse(path, f"it is longer than {MAX_PATH_BYTES} bytes", what=what)
    if path.startswith("/"):
        raise _refuse(path, "it is absolute; paths are relative to the store's root", what=what)
    return path


def check_path(path: str) -> str:
    """Return `path` unchanged if it is a safe object path under the root.

    Raises `PathError` (naming the path and the reason) for a non-string, an
    empty or absolute path, an empty, ``.`` or ``..`` segment, a backslash,
    a control character (NUL included), a lone surrogate, a segment over
    255 bytes, a path over 1024 bytes, or a segment ending in ``#<digits>``.
    """
    _check_text(path, "path")
    if path == "":
        raise PathError("path '' is refused: it is empty", path=path)
    _check_segments(path, "path")
    return path


def check_prefix(prefix: str) -> str:
    """Normalise a store's root prefix: ``""`` for none, else a checked path without trailing ``/``.

    One trailing ``/`` is accepted (``"exports/"`` is ``"exports"``). Raises
    `PathError` as `check_path` does.
    """
    _check_text(prefix, "prefix")
    if prefix == "":
        return ""
    body = prefix[:-1] if prefix.endswith("/") else prefix
    if body.startswith("/"):
        raise _refuse(prefix, "it is absolute; give it relative to the bucket", what="prefix")
    _check_segments(body, "prefix")
    return body


def check_list_prefix(prefix: str) -> str:
    """Check a listing prefix: ``""`` (everything) or a path, optionally ending in ``/``."""
    _check_text(prefix, "list prefix")
    if prefix == "":
        return prefix
    body = prefix[:-1] if prefix.endswith("/") else prefix
    if body == "":
        raise _refuse(prefix, "it is absolute; paths are relative to the store's root")
    _check_segments(body, "list prefix")
    return prefix


def join_path(*segments: str) -> str:
    """Join path pieces with ``/`` and check the result with `check_path`.

    Each piece may itself hold ``/``; pieces that come from data should go
    through `encode_segment` first.
    """
    return check_path("/".join(segments))


def encode_segment(name: str) -> str:
    """Encode a name from data into one safe path segment (reverse: `decode_segment`).

    Keeps ``A-Z a-z 0-9 - _ . ~`` and percent-encodes every other UTF-8 byte
    (``%XX``, upper case), so ``/``, ``\\``, ``%``, controls and non-ASCII
    never reach a path raw. ``.`` and ``..`` become ``%2E`` and ``%2E%2E``.
    Raises `PathError` for an empty name, a lone surrogate, or a name whose
    encoding exceeds 255 bytes.
    """
    if not isinstance(name, str):
        raise PathError(f"name must be a string, got {type(name).__name__}")
    if name == "":
        raise PathError("name '' cannot be a path segment: it is empty", path=name)
    if name in (".", ".."):
        return "%2E" * len(name)
    try:
        raw = name.encode("utf-8")
    except UnicodeEncodeError:
        raise PathError(
            f"name {name!r} cannot be a path segment: it is not valid Unicode", path=name
        ) from None
    # quote() always keeps RFC 3986's unreserved characters (our _SAFE set) and
    # escapes every other UTF-8 byte in upper case; safe="" escapes "/" too.
    out = quote(raw, safe="")
    if len(out) > MAX_SEGMENT_BYTES:
        raise PathError(
            f"name {name[:60]!r}... cannot be a path segment: encoded it is "
            f"{len(out)} bytes, over {MAX_SEGMENT_BYTES}",
            path=name,
        )
    return out


def decode_segment(segment: str) -> str:
    """The name `encode_segment` made `segment` from.

    Raises `PathError` for text `encode_segment` never produces (a raw unsafe
    character, a malformed or lower-case escape, invalid UTF-8).
    """
    if not segment:
        raise PathError("segment '' is not an encoded name", path=segment)
    pieces = _PERCENT.split(segment)
    buf = bytearray()
    for i, piece in enumerate(pieces):
        if i % 2:
            buf.append(int(piece, 16))
            continue
        if any(ch not in _SAFE for ch in piece):
            raise PathError(f"segment {segment!r} is not an encoded name", path=segment)
        buf.extend(piece.encode("ascii"))
    try:
        name = buf.decode("utf-8")
    except UnicodeDecodeError:
        raise PathError(
            f"segment {segment!r} does not decode to UTF-8 text", path=segment
        ) from None
    if encode_segment(name) != segment:
        # Escapes of safe characters (e.g. "%41" for "A") are not canonical: one
        # name has exactly one encoding, so two segments never mean one name.
        raise PathError(f"segment {segment!r} is not in canonical encoded form", path=segment)
    return name
