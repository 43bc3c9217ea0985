"""Property: a write lands under the store's root or is refused; nothing ever lands outside.

Checked on the real filesystem around a local-fs root: after every write
attempt, every file in the sandbox is either the untouched sibling planted
there or inside the root.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from hypaware.core.errors import PathError, StoreError
from hypaware.core.paths import MAX_SEGMENT_BYTES, check_path, encode_segment
from hypaware.plugins.local_fs import LocalFsConfig, create

from .conftest import make_ctx

names = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=40)
tricky = st.sampled_from(
    [
        "..",
        ".",
        "",
        "a",
        "b.parquet",
        "\\",
        "..\\..",
        "\x00",
        "%2E%2E",
        "~",
        "C:",
        "x#1",
        "é",
        "/",
        "//",
        "\n",
        "..%2F",
        "sibling",
        "root",
        " ",
        "...",
        "\u2028",
    ]
)
raw_paths = st.one_of(
    names,
    st.lists(st.one_of(tricky, names), min_size=1, max_size=6).map("/".join),
    st.lists(tricky, min_size=1, max_size=6).map("".join),
)


def _files(top: Path) -> set[Path]:
    found = set()
    for dirpath, _dirs, files in os.walk(top):
        for name in files:
            found.add(Path(dirpath, name))
    return found


@given(dataset=names, partition=names, raw=raw_paths)
def test_writes_stay_under_the_root(dataset: str, partition: str, raw: str) -> None:
    with tempfile.TemporaryDirectory(prefix="hyp-root-") as tmp:
        sandbox = Path(tmp).resolve()
        sibling = sandbox / "sibling" / "keep"
        sibling.parent.mkdir()
        sibling.write_bytes(b"untouched")
        root = sandbox / "exports" / "root"
        store = create(LocalFsConfig(root=str(root)), make_ctx(sandbox))

        try:
            layout: str | None = (
                f"{encode_segment(dataset)}/date={encode_segment(partition)}/part-0.parquet"
            )
        except PathError:
            too_long = max(len(dataset.encode()), len(partition.encode())) * 3
            assert too_long > MAX_SEGMENT_BYTES
            layout = None
        candidates = [raw, f"{encode_segment(dataset[:20])}/{raw}"]
        if layout is not None:
            candidates.append(layout)

        async def attempt(path: str) -> str:
            try:
                await store.put(path, b"data")
            except PathError:
                return "refused"
            except StoreError as exc:
                # A valid path the filesystem cannot hold (a file where a
                # directory is needed): a clear error naming the path.
                return f"failed: {exc}"
            return "written"

        for path in candidates:
            outcome = asyncio.run(attempt(path))
            try:
                check_path(path)
                valid = True
            except PathError:
                valid = False
            assert (outcome != "refused") == valid, (path, outcome)
            if outcome == "written":
                target = (root / path).resolve()
                assert target.is_relative_to(root), path
                assert target.read_bytes() == b"data"
            elif outcome.startswith("failed"):
                assert repr(path) in outcome
            outside = {f for f in _files(sandbox) if not f.is_relative_to(root)}
            assert outside == {sibling}, (path, outside)
        if layout is not None and outcome == "written":
            assert asyncio.run(store.get(layout)) == b"data"
        assert sibling.read_bytes() == b"untouched"
