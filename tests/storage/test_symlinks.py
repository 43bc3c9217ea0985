"""@hypaware/local-fs never writes, reads, lists or deletes through a symbolic link below its root.

Each case plants one link (to a directory or a file outside the root) where
a real export would write, runs the export through a sink built from config,
and checks that nothing outside the root changed and that every partition
came back as a sink failure naming the link.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hypaware
from hypaware import load_config
from hypaware.blob.sink import BlobSink
from hypaware.blob.store import ObstoreBlobStore
from hypaware.core.errors import PathError
from hypaware.core.types import ExportOptions
from hypaware.destinations.local_fs import LocalFsConfig, create

from ..blob.data import registry, rich_batch

OPTS = ExportOptions()


def build_sink(base: Path, root: Path) -> BlobSink:
    doc = {
        "state_dir": str(base / "state"),
        "sinks": {
            "archive": {
                "writer": "@hypaware/format-jsonl",
                "destination": "@hypaware/local-fs",
                "config": {"root": str(root)},
            }
        },
    }
    loaded = load_config(doc)
    (plan,) = hypaware.resolve(loaded, registry())
    sink = hypaware.build(plan, config=loaded)
    assert isinstance(sink, BlobSink)
    return sink


def snapshot(directory: Path) -> dict[str, bytes | str]:
    """Every entry under `directory` (not following links) with its bytes or link target."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(directory):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            rel = str(path.relative_to(directory))
            if path.is_symlink():
                out[rel] = "-> " + os.readlink(path)
            elif path.is_file():
                out[rel] = path.read_bytes()
            else:
                out[rel] = "dir"
    return out


def written_paths() -> list[str]:
    """The relative paths a clean export of the test batch writes (learned once)."""
    if not _PATHS:
        with tempfile.TemporaryDirectory() as tmp:
            base = Path(tmp)
            sink = build_sink(base, base / "root")

            async def run() -> None:
                try:
                    result = await sink.export_batch(rich_batch(parts=2, rows=30), OPTS)
                    assert result.retry_partitions == ()
                finally:
                    await sink.close()

            asyncio.run(run())
            _PATHS.extend(
                str(p.relative_to(base / "root"))
                for p in sorted((base / "root").rglob("*"))
                if p.is_file()
            )
    return _PATHS


_PATHS: list[str] = []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    depth=st.sampled_from(["dataset", "day", "file", "nested"]),
    target=st.sampled_from(["dir", "file"]),
    relative=st.booleans(),
    which=st.integers(0, 10),
)
def test_no_byte_is_written_through_a_symlink(
    depth: str, target: str, relative: bool, which: int
) -> None:
    paths = written_paths()
    chosen = Path(paths[which % len(paths)])
    dataset_dir, day_dir = chosen.parts[0], Path(*chosen.parts[:2])
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        root, outside = base / "root", base / "outside"
        root.mkdir()
        outside.mkdir()
        (outside / "keep.txt").write_bytes(b"precious")
        if depth == "nested":
            # The link sits at the dataset level; outside already has the day directory.
            (outside / day_dir.name).mkdir()
            link, link_target = root / dataset_dir, outside
        elif target == "file":
            link_at = {"dataset": dataset_dir, "day": day_dir, "file": chosen}[depth]
            link, link_target = root / link_at, outside / "keep.txt"
        else:
            link_at = {"dataset": dataset_dir, "day": day_dir, "file": chosen}[depth]
            link, link_target = root / link_at, outside
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(os.path.relpath(link_target, link.parent) if relative else link_target)
        before = snapshot(outside)
        sink = build_sink(base, root)

        async def run() -> Any:
            try:
                return await sink.export_batch(rich_batch(parts=2, rows=30), OPTS)
            finally:
                await sink.close()

        result = asyncio.run(run())
        assert snapshot(outside) == before, "something was written outside the root"
        assert result.exported == ()
        assert len(result.retry_partitions) == 2
        reasons = [r.reason for r in result.retry_partitions]
        assert all("sink 'archive'" in r for r in reasons), reasons
        assert any(f"{link.relative_to(root)}' below the root" in r for r in reasons), reasons
        # No temporary or partial file anywhere; files of other days are whole and real.
        for path in root.rglob("*"):
            assert "#" not in path.name, path
            if path.is_file() and not path.is_symlink():
                assert path.resolve().is_relative_to(root.resolve())


def test_a_symlinked_root_is_allowed(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    sink = build_sink(tmp_path, tmp_path / "link")

    async def run() -> Any:
        try:
            return await sink.export_batch(rich_batch(parts=1, rows=10), OPTS)
        finally:
            await sink.close()

    result = asyncio.run(run())
    assert result.retry_partitions == () and len(result.exported) == 1
    assert [p for p in real.rglob("*") if p.is_file()]


class _Ctx:
    sink_name = "archive"

    def __init__(self, base: Path) -> None:
        self.base = base

    def resolve_path(self, text: str) -> Path:
        return self.base / text


async def test_reads_lists_and_deletes_through_a_link_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    (outside / "d").mkdir(parents=True)
    (outside / "d" / "secret.txt").write_bytes(b"not yours")
    root = tmp_path / "root"
    root.mkdir()
    (root / "ds").symlink_to(outside)
    store = create(LocalFsConfig(root="root"), _Ctx(tmp_path))  # type: ignore[arg-type]
    assert isinstance(store, ObstoreBlobStore)
    for call in (
        lambda: store.get("ds/d/secret.txt"),
        lambda: store.get_range("ds/d/secret.txt", 0, 3),
        lambda: store.head("ds/d/secret.txt"),
        lambda: store.delete("ds/d/secret.txt"),
        lambda: store.put("ds/d/new.txt", b"x"),
    ):
        with pytest.raises(PathError, match=r"'ds' below the root .* is a symbolic link"):
            await call()
    with pytest.raises(PathError, match="symbolic link"):
        [m async for m in store.list("ds")]
    with pytest.raises(PathError, match="symbolic link"):
        [m async for m in store.list()]
    assert (outside / "d" / "secret.txt").read_bytes() == b"not yours"
    assert sorted(p.name for p in (outside / "d").iterdir()) == ["secret.txt"]
    await store.close()


async def test_the_reader_filesystem_refuses_links_like_the_store(tmp_path: Path) -> None:
    import pyarrow.dataset as pads
    import pyarrow.fs as pafs

    outside = tmp_path / "outside"
    (outside / "d").mkdir(parents=True)
    (outside / "d" / "secret.txt").write_bytes(b"not yours")
    root = tmp_path / "root"
    (root / "real" / "d").mkdir(parents=True)
    (root / "real" / "d" / "ok.txt").write_bytes(b"mine")
    (root / "ds").symlink_to(outside)
    (root / "real" / "d" / "file.txt").symlink_to(outside / "d" / "secret.txt")
    store = create(LocalFsConfig(root="root"), _Ctx(tmp_path))  # type: ignore[arg-type]
    assert isinstance(store, ObstoreBlobStore)
    fs, base = store.filesystem()
    assert fs.cat_file(f"{base}/real/d/ok.txt") == b"mine"
    linked = r"'ds' below the root .* is a symbolic link"
    for call in (
        lambda: fs.cat_file(f"{base}/ds/d/secret.txt"),
        lambda: fs.cat_file(f"{base}/ds/d/secret.txt", start=0, end=3),
        lambda: fs.cat_ranges([f"{base}/ds/d/secret.txt"], [0], [3]),
        lambda: fs.info(f"{base}/ds/d/secret.txt"),
        lambda: fs.ls(f"{base}/ds/d"),
        lambda: fs.open(f"{base}/ds/d/secret.txt", "rb").read(),
        lambda: fs.modified(f"{base}/ds/d/secret.txt"),
        lambda: fs.pipe_file(f"{base}/ds/d/new.txt", b"x"),
    ):
        with pytest.raises(PathError, match=linked):
            call()
    with pytest.raises(PathError, match=r"'real/d/file.txt' below the root"):
        fs.cat_file(f"{base}/real/d/file.txt")
    # A listing that shows a link (a directory or a file) is refused too.
    with pytest.raises(PathError, match="symbolic link"):
        fs.ls(base)
    with pytest.raises(PathError, match=r"'real/d/file.txt' below the root"):
        fs.ls(f"{base}/real/d", detail=True)
    # Through pyarrow, as queries read: the store's PathError comes back as is.
    pyfs = pafs.PyFileSystem(pafs.FSSpecHandler(fs))
    with pytest.raises(PathError, match=linked):
        pyfs.open_input_file(f"{base}/ds/d/secret.txt")
    with pytest.raises(PathError, match="symbolic link"):
        pads.dataset(f"{base}/ds", filesystem=pyfs, format="parquet")
    assert sorted(p.name for p in (outside / "d").iterdir()) == ["secret.txt"]
    await store.close()


class _HeldStore:
    """The sink's store, holding the first day's put (its bytes all read) until a later one fails.

    So the refused put fails while an earlier put of the same batch is
    still completing: the moment its error could be lost behind the next file.
    """

    def __init__(self, inner: Any, held_day: str) -> None:
        self.inner = inner
        self.held_day = held_day
        self.failed = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def put(self, path: str, data: Any, **kwargs: Any) -> Any:
        if f"date={self.held_day}/" in path:
            body = b"".join([chunk async for chunk in data])
            # A wide margin: the refused put fails within milliseconds.
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self.failed.wait(), 30)
            return await self.inner.put(path, body, **kwargs)
        try:
            return await self.inner.put(path, data, **kwargs)
        except PathError:
            self.failed.set()
            raise


def test_a_refused_day_of_a_multi_day_partition_is_reported_with_its_own_cause(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import attrs

    from hypaware.cli.status import collect_status
    from hypaware.export.driver import ExportDriver

    from ..query.helpers import INFO, cache_for, config, make_rows

    root, outside = tmp_path / "root", tmp_path / "outside"
    sink_config = {
        "writer": "@hypaware/format-jsonl",
        "destination": "@hypaware/local-fs",
        "config": {"root": str(root)},
    }
    cfg = config(tmp_path, {"archive": sink_config})
    # Not split by time: each partition (one per conversation) spans three days.
    cache = cache_for(cfg, attrs.evolve(INFO, time_grain=None))
    cache.append(INFO.name, [r for day in range(3) for r in make_rows(day * 30, 30, day=day)])
    cache.seal(INFO.name)
    outside.mkdir()
    (root / "events").mkdir(parents=True)
    (root / "events" / "date=2026-03-02").symlink_to(outside)

    async def run() -> Any:
        driver = ExportDriver.from_config(cfg, cache=cache)
        try:
            sink = driver.sink("archive")
            assert isinstance(sink, BlobSink)
            sink.lanes = 1  # the days one after the other, sharing the batch's puts
            sink.store = _HeldStore(sink.store, "2026-03-01")  # type: ignore[assignment]
            return await driver.run_once(backfill=True)
        finally:
            await driver.close()

    with caplog.at_level("WARNING", logger="hypaware"):
        report = asyncio.run(run())
    assert list(outside.iterdir()) == []
    cause = "'events/date=2026-03-02' below the root"
    (failure,) = report.sinks["archive"].failures
    assert cause in failure.reason and "refusing to write" in failure.reason, failure.reason
    assert failure.partitions == 3
    last_error = collect_status(cfg)["sinks"]["archive"]["last_error"]
    assert cause in last_error, last_error
    lines = [r.getMessage() for r in caplog.records if "batch" in r.getMessage()]
    assert lines and all(cause in line for line in lines), lines
    for text in (failure.reason, last_error, *lines):
        assert "not read to the end" not in text
