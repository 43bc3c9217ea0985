"""Queries over @hypaware/local-fs never read through a symbolic link below the root.

Each case exports real rows, then swaps one entry the query would read (the
dataset directory, a day directory, a Parquet file) for a link to a copy
outside the root whose rows are forged. The link is planted before the
query plans (its listing meets it) or between planning and reading (only
the reader's filesystem meets it). The query refuses with a typed error
naming the link, before any forged row comes back.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hypaware
from hypaware.querying.api import plan_query

from ..query.helpers import cache_for, config, export, fill, make_rows, parquet_sink

FORGED = 10_000


def forge(path: Path) -> None:
    """Rewrite every Parquet file under `path` with row ids no export ever wrote."""
    files = [path] if path.is_file() else sorted(path.rglob("*.parquet"))
    for file in files:
        table = pq.read_table(file)
        ids = pc.add(table.column("row_id"), pa.scalar(FORGED, pa.int64()))
        pq.write_table(table.set_column(0, "row_id", ids), file)


def archive(base: Path) -> tuple[hypaware.HypawareConfig, Path]:
    root = base / "root"
    cfg = config(base, {"arch": parquet_sink(root)})
    cache = cache_for(cfg)
    fill(cache, make_rows(0, 40, day=0))
    fill(cache, make_rows(40, 40, day=1))
    export(cfg, cache)
    return cfg, root


@settings(max_examples=16, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    depth=st.sampled_from(["dataset", "day", "file"]),
    planted=st.sampled_from(["before planning", "before reading"]),
    relative=st.booleans(),
    which=st.integers(0, 10),
)
def test_a_query_never_reads_through_a_symlink(
    depth: str, planted: str, relative: bool, which: int
) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        cfg, root = archive(base)
        files = sorted(p.relative_to(root) for p in root.rglob("*.parquet"))
        chosen = files[which % len(files)]
        link_at = {"dataset": chosen.parts[0], "day": Path(*chosen.parts[:2]), "file": chosen}
        rel = Path(link_at[depth])
        link = root / rel
        outside = base / "outside"
        outside.mkdir()
        target = outside / rel.name

        def plant() -> None:
            # The real entry moves out (forged) and a link to it takes its place.
            link.rename(target)
            forge(target)
            link.symlink_to(os.path.relpath(target, link.parent) if relative else target)

        async def run() -> None:
            if planted == "before planning":
                plant()
            _plan, reader = await plan_query(cfg, "events")
            if planted == "before reading":
                plant()
            table = reader.read_all()
            # Reached only if the link was not refused: then no forged row may show.
            assert max(table.column("row_id").to_pylist()) < FORGED, "read outside the root"

        with pytest.raises(hypaware.SourceUnreadableError) as caught:
            asyncio.run(run())
        assert f"{str(rel)!r} below the root" in str(caught.value)
        assert "symbolic link" in str(caught.value)


def test_a_query_over_a_clean_archive_reads_the_sink(tmp_path: Path) -> None:
    # The same setup without a link: every row comes back, none forged.
    cfg, root = archive(tmp_path)
    assert any(root.rglob("*.parquet"))
    _plan, reader = asyncio.run(plan_query(cfg, "events"))
    assert sorted(reader.read_all().column("row_id").to_pylist()) == list(range(80))
    assert _plan.sink == "arch" and _plan.sink_partitions


@pytest.mark.parametrize("depth", ["day", "file"])
def test_the_query_command_refuses_a_link_and_prints_no_forged_row(
    tmp_path: Path, depth: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    from hypaware.cli import main

    _cfg, root = archive(tmp_path)
    doc = {
        "state_dir": str(tmp_path / "state"),
        "cache": {"path": str(tmp_path / "cache")},
        "sinks": {"arch": parquet_sink(root)},
    }
    (tmp_path / "hypaware.json").write_text(json.dumps(doc))
    chosen = sorted(p.relative_to(root) for p in root.rglob("*.parquet"))[0]
    rel = chosen.parent if depth == "day" else chosen
    target = tmp_path / "outside" / rel.name
    target.parent.mkdir()
    (root / rel).rename(target)
    forge(target)
    (root / rel).symlink_to(target)
    code = main(["query", "--config", str(tmp_path / "hypaware.json"), "--format", "csv", "events"])
    out, err = capsys.readouterr()
    assert code == 1, (out, err)
    assert f"{str(rel)!r} below the root" in err and "symbolic link" in err, err
    assert str(FORGED) not in out
