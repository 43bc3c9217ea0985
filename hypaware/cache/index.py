"""Seal indexes: what one seal wrote, in one small file, so listing reads no segment.

A seal writes its segments, then ``sealed/.index-<first seq>-<last seq>.json``
holding each new segment's metadata (the same `SEGMENT_META` its file holds,
plus its size). A reader that meets new segments reads the indexes it has
not read yet instead of opening every segment. The index is only a hint:
segments not in one (a seal cut short before writing it, an index that
cannot be read) are described from their own metadata, as before, and an
entry is used only for a segment the directory listing shows. Retention
removes an index once none of its seqs has a segment left.

The leading dot keeps the file out of tools that read ``sealed/`` as a
dataset (pyarrow's skips such names).
"""

from __future__ import annotations

import bisect
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = ["INDEX_NAME", "covers", "dump_index", "index_name", "read_index", "stale_indexes"]

INDEX_NAME = re.compile(r"^\.index-(\d{12})-(\d{12})\.json$")
_VERSION = 1


def index_name(seqs: Iterable[int]) -> str:
    """The index file name of a seal that wrote segments of `seqs`."""
    ordered = sorted(seqs)
    return f".index-{ordered[0]:012d}-{ordered[-1]:012d}.json"


def dump_index(entries: Mapping[str, Mapping[str, Any]]) -> bytes:
    """The bytes of an index of `entries` (segment file name -> metadata with "size")."""
    return json.dumps({"version": _VERSION, "segments": entries}, sort_keys=True).encode()


def read_index(path: Path) -> dict[str, dict[str, Any]]:
    """The entries of the index at `path` (file name -> metadata).

    Raises `OSError` or `ValueError` (including JSON errors) for an index
    that cannot be used; callers then fall back to the segments themselves.
    """
    doc = json.loads(path.read_bytes())
    if not isinstance(doc, dict) or doc.get("version") != _VERSION:
        raise ValueError(f"not a version {_VERSION} seal index")
    entries = doc.get("segments")
    if not isinstance(entries, dict) or not all(isinstance(v, dict) for v in entries.values()):
        raise ValueError("no segment entries")
    return entries


def covers(name: str, seqs: Sequence[int]) -> bool:
    """Whether the index called `name` has a seq among `seqs` (sorted) in its range."""
    m = INDEX_NAME.match(name)
    if m is None:
        return False
    lo, hi = int(m.group(1)), int(m.group(2))
    i = bisect.bisect_left(seqs, lo)
    return i < len(seqs) and seqs[i] <= hi


def stale_indexes(names: Iterable[str], seqs: Iterable[int]) -> list[str]:
    """The index file names among `names` whose seq range holds none of `seqs`."""
    live = sorted(seqs)
    return [name for name in names if INDEX_NAME.match(name) and not covers(name, live)]
