"""Lifecycles: `async with` on built sinks and the driver, when `flush()` is called, `export_once`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

import hypaware
from hypaware import ExportDriver, HypawareError, ManagedSink, SinkError
from hypaware.blob.sink import BlobSink

from .helpers import ScriptedSink, make_cache, sinks


class BufferingSink(ScriptedSink):
    """Flushable: records when it is flushed relative to close()."""

    def __init__(self, name: str = "buffering", *, broken: bool = False) -> None:
        super().__init__(name)
        self.events: list[str] = []
        self.broken = broken

    async def flush(self) -> None:
        self.events.append("flush")
        if self.broken:
            raise SinkError("the buffer cannot be written")

    async def close(self) -> None:
        self.events.append("close")
        await super().close()


def config(tmp_path: Path, sinks: dict[str, Any]) -> hypaware.HypawareConfig:
    return hypaware.load_config(
        {
            "state_dir": str(tmp_path / "state"),
            "cache": {"path": str(tmp_path / "cache")},
            "sinks": sinks,
        }
    )


async def test_async_with_closes_a_first_party_sink_and_keeps_its_class(tmp_path: Path) -> None:
    cfg = config(
        tmp_path,
        {
            "pq": {
                "writer": "@hypaware/format-parquet",
                "destination": "@hypaware/local-fs",
                "config": {"root": str(tmp_path / "out")},
            }
        },
    )
    (plan,) = hypaware.resolve(cfg)
    async with hypaware.build(plan, config=cfg) as sink:
        assert isinstance(sink, BlobSink)
    with pytest.raises(hypaware.SinkClosedError):
        await sink.export_batch(None, hypaware.ExportOptions())  # type: ignore[arg-type]


async def test_async_with_on_a_plugin_sink_without_it_goes_through_a_proxy(
    tmp_path: Path,
) -> None:
    cfg = config(
        tmp_path, {"log": {"plugin": "@acme/rowlog", "config": {"path": str(tmp_path / "r.jsonl")}}}
    )
    (plan,) = hypaware.resolve(cfg)
    built = hypaware.build(plan, config=cfg)
    assert isinstance(built, ManagedSink)
    assert type(built).__name__ == "_Managed"
    from hypaware_acme.sink import RowLogSink

    assert isinstance(built, RowLogSink)  # the plugin's own class checks still hold
    async with built as sink:
        assert sink.path.name == "r.jsonl"  # attributes reach the plugin's sink
        assert not sink.closed
    assert built.closed


async def test_driver_flushes_before_close_and_on_request(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=6)
    sink = BufferingSink()
    async with ExportDriver(cache, sinks(("buf", sink)), state=tmp_path / "state") as driver:
        report = await driver.run_once(backfill=True)
        assert report.ok
        assert sink.events == []  # exporting never flushes on its own
        assert await driver.flush() == []
        assert sink.events == ["flush"]
    assert sink.events == ["flush", "flush", "close"]


async def test_a_failing_flush_is_reported_and_the_sink_still_closes(tmp_path: Path) -> None:
    cache = make_cache(tmp_path / "cache", count=3)
    sink = BufferingSink(broken=True)
    driver = ExportDriver(cache, sinks(("buf", sink)), state=tmp_path / "state")
    await driver.run_once(backfill=True)
    errors = await driver.flush()
    assert errors == ["sink 'buf': flush() failed: SinkError: the buffer cannot be written"]
    await driver.close()
    assert sink.events[-2:] == ["flush", "close"] and sink.closed


def test_export_once_from_synchronous_code(tmp_path: Path) -> None:
    cfg = config(
        tmp_path, {"log": {"plugin": "@acme/rowlog", "config": {"path": str(tmp_path / "r.jsonl")}}}
    )
    cache = make_cache(tmp_path / "cache", count=12)
    report = hypaware.export_once(cfg, cache=cache, backfill=True)
    assert isinstance(report, hypaware.RunReport)
    assert report.ok and report.sinks["log"].rows == 12
    again = hypaware.export_once(cfg, cache=cache)
    assert again.ok and again.rows == 0


async def test_export_once_refuses_inside_an_event_loop(tmp_path: Path) -> None:
    cfg = config(tmp_path, {})
    with pytest.raises(HypawareError) as caught:
        hypaware.export_once(cfg)
    assert str(caught.value) == (
        "export_once() cannot run inside an event loop: await ExportDriver.run_once() instead"
    )
    with pytest.raises(hypaware.QueryError) as query_caught:
        hypaware.query(cfg, "events")
    assert str(query_caught.value).split(":")[0] == "query() cannot run inside an event loop"
    assert not [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
