"""Iceberg tables on @hypaware/local-fs never go through a symbolic link below the root.

Table files (data, manifests, metadata) are written and read by the
Iceberg FileIO straight on the destination's obstore store; it runs the
blob store's own link check, so a link planted in the table's directories
fails the export (nothing written outside) and refuses the query (nothing
read from outside), each with a `PathError` naming the link.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

import hypaware

from ..query.helpers import cache_for, config, export, fill, iceberg_sink, make_rows

pytestmark = pytest.mark.iceberg

TABLE = Path("hyp/events")


def snapshot(directory: Path) -> dict[str, bytes | str]:
    out: dict[str, bytes | str] = {}
    for path in sorted(directory.rglob("*")):
        rel = str(path.relative_to(directory))
        out[rel] = path.read_bytes() if path.is_file() else "dir"
    return out


@pytest.mark.parametrize(
    "link_at",
    [TABLE.parent, TABLE / "metadata", TABLE / "data" / "ts_day=2026-03-02"],
    ids=["namespace", "metadata", "day"],
)
def test_an_export_through_a_link_fails_and_writes_nothing_outside(
    tmp_path: Path, link_at: Path
) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    cfg = config(tmp_path, {"ice": iceberg_sink(root)})
    cache = cache_for(cfg)
    outside.mkdir()
    (outside / "keep.txt").write_bytes(b"precious")
    fill(cache, make_rows(0, 20, day=0))
    if link_at == TABLE.parent:
        root.mkdir()
        (root / link_at).symlink_to(outside)
    else:
        assert export(cfg, cache).sinks["ice"].errors == []
        if (root / link_at).exists():
            # An existing directory moves out; the link takes its place.
            shutil.move(root / link_at, outside / link_at.name)
        else:
            (outside / link_at.name).mkdir()
        (root / link_at).symlink_to(os.path.relpath(outside / link_at.name, root / link_at.parent))
    before = snapshot(outside)
    fill(cache, make_rows(20, 20, day=1))
    report = export(cfg, cache).sinks["ice"]
    assert snapshot(outside) == before, "something was written outside the root"
    assert report.failures or report.errors, report
    text = " ".join(str(e) for e in [*report.errors, *report.failures])
    # Reasons are capped in length; the link's name comes early in them.
    assert "refusing to" in text and f"{str(link_at)!r} below the root" in text, text


def test_a_query_of_a_table_through_a_link_is_refused(tmp_path: Path) -> None:
    root, outside = tmp_path / "root", tmp_path / "outside"
    cfg = config(tmp_path, {"ice": iceberg_sink(root)})
    cache = cache_for(cfg)
    fill(cache, make_rows(0, 20, day=0))
    fill(cache, make_rows(20, 20, day=1))
    assert export(cfg, cache).sinks["ice"].errors == []
    data_file = next((root / TABLE / "data").rglob("*.parquet")).relative_to(root)
    outside.mkdir()
    for link_at in (TABLE / "metadata", TABLE / "data", data_file.parent, data_file):
        real, moved = root / link_at, outside / link_at.name
        shutil.move(real, moved)
        real.symlink_to(moved)
        with pytest.raises(hypaware.SourceUnreadableError) as caught:
            hypaware.query(cfg, "events").read_all()
        message = str(caught.value)
        assert f"{str(link_at)!r} below the root" in message, message
        assert "symbolic link" in message
        real.unlink()
        shutil.move(moved, real)
    # Put back, the table reads whole again.
    assert hypaware.query(cfg, "events").read_all().num_rows == 40
