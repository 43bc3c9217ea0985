"""`hypaware.query`: cache + sink union, filters, the cache-only warning and bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import hypaware
from hypaware.querying.api import CacheOnlyWarning, plan_query, query_async
from hypaware.testing.servers.peers import free_port

from .helpers import (
    DAY0,
    cache_for,
    config,
    drop_segments,
    export,
    fill,
    ids,
    jsonl_sink,
    make_rows,
    parquet_sink,
)


def _archive(tmp_path: Path, **sinks: dict[str, object]) -> hypaware.HypawareConfig:
    cfg = config(tmp_path, sinks or {"arch": parquet_sink(tmp_path / "out")})
    cache = cache_for(cfg)
    fill(cache, make_rows(0, 60, day=0))
    fill(cache, make_rows(60, 60, day=1))
    export(cfg, cache)
    fill(cache, make_rows(120, 30, day=2))
    return cfg


def test_import_stays_light() -> None:
    code = "import sys, hypaware; hypaware.__all__; assert 'pyarrow' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_public_names() -> None:
    import hypaware.querying.api

    # Importing the module must not shadow the function on the package.
    assert hypaware.query is hypaware.querying.api.query
    for name in ("query", "query_async", "QueryError", "QueryInputError", "NotQueryableError"):
        assert name in hypaware.__all__
        assert getattr(hypaware, name) is not None


async def test_union_of_sink_and_cache_has_every_row_once(tmp_path: Path) -> None:
    cfg = _archive(tmp_path)
    plan, reader = await plan_query(cfg, "events")
    assert ids(reader) == list(range(150))
    # Exported partitions come from the sink, the newest from the cache.
    assert len(plan.sink_partitions) == 6
    assert len(plan.cache_partitions) == 3
    assert plan.sink == "arch"


async def test_rows_dropped_from_the_cache_still_come_from_the_sink(tmp_path: Path) -> None:
    cfg = _archive(tmp_path)
    drop_segments(cache_for(cfg), 6)
    assert ids(await query_async(cfg, "events")) == list(range(150))


def test_filters_match_a_filter_over_all_rows(tmp_path: Path) -> None:
    cfg = _archive(tmp_path)
    everything = pa.Table.from_pylist(make_rows(0, 60, day=0) + make_rows(60, 60, day=1))
    everything = pa.concat_tables(
        [everything, pa.Table.from_pylist(make_rows(120, 30, day=2))]
    ).cast(hypaware.query(cfg, "events").schema)
    since, until = DAY0.replace(hour=1, second=30), DAY0.replace(day=3, hour=1, second=10)
    mask = (
        (pc.field("ts") >= pa.scalar(since, everything.schema.field("ts").type))
        & (pc.field("ts") < pa.scalar(until, everything.schema.field("ts").type))
        & pc.field("conv").isin(["c1", "c2"])
        & (pc.field("tokens") > 4)
    )
    expected = sorted(everything.filter(mask).column("row_id").to_pylist())
    got = hypaware.query(
        cfg,
        "events",
        since=since,
        until=until.isoformat(),
        keys=["c1", "c2"],
        where=hypaware.col("tokens") > 4,
        columns=["row_id", "conv"],
    ).read_all()
    assert got.column_names == ["row_id", "conv"]
    assert sorted(got.column("row_id").to_pylist()) == expected
    text = hypaware.query(
        cfg, "events", since=since, until=until, keys="c1", where="tokens > 4 or role = 'x'"
    )
    assert ids(text) == sorted(r for r in expected if everything.column("conv")[r].as_py() == "c1")


def test_limit(tmp_path: Path) -> None:
    cfg = _archive(tmp_path)
    assert hypaware.query(cfg, "events", limit=7).read_all().num_rows == 7
    assert hypaware.query(cfg, "events", limit=0).read_all().num_rows == 0


def test_cache_alone_warns_about_retention(tmp_path: Path) -> None:
    cfg = config(tmp_path, {"log": jsonl_sink(tmp_path / "out")})
    cache = cache_for(cfg)
    fill(cache, make_rows(0, 20))
    export(cfg, cache)
    with pytest.warns(CacheOnlyWarning, match="retention"):
        reader = hypaware.query(cfg, "events")
    assert ids(reader) == list(range(20))


def test_first_queryable_sink_by_name_is_the_default(tmp_path: Path) -> None:
    cfg = _archive(
        tmp_path,
        a_log=jsonl_sink(tmp_path / "log"),
        b_arch=parquet_sink(tmp_path / "b"),
        c_arch=parquet_sink(tmp_path / "c"),
    )
    plan, reader = _plan(cfg)
    assert plan.sink == "b_arch"
    assert ids(reader) == list(range(150))
    plan, reader = _plan(cfg, sink="c_arch")
    assert plan.sink == "c_arch"
    assert ids(reader) == list(range(150))


def _plan(cfg: hypaware.HypawareConfig, **kw: object) -> tuple[object, pa.RecordBatchReader]:
    import asyncio

    plan, reader = asyncio.run(plan_query(cfg, "events", **kw))  # type: ignore[arg-type]
    return plan, reader


def test_query_inside_an_event_loop_points_to_query_async(tmp_path: Path) -> None:
    import asyncio

    cfg = _archive(tmp_path)

    async def inside() -> None:
        with pytest.raises(hypaware.QueryError, match="query_async"):
            hypaware.query(cfg, "events")

    asyncio.run(inside())


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"dataset": "evnts"}, hypaware.UnknownDatasetError, "did you mean 'events'"),
        ({"sink": "log"}, hypaware.NotQueryableError, "'log' is not queryable"),
        ({"sink": "archive"}, hypaware.NotQueryableError, "no sink named 'archive'"),
        ({"since": "yesterday-ish"}, hypaware.QueryInputError, "since: 'yesterday-ish'"),
        ({"until": "2026-02-30"}, hypaware.QueryInputError, "until"),
        (
            {"since": "2026-03-02", "until": "2026-03-01"},
            hypaware.QueryInputError,
            "before since",
        ),
        ({"where": hypaware.col("nope") > 1}, hypaware.QueryInputError, "no column 'nope'"),
        ({"where": hypaware.col("tokns") == 1}, hypaware.QueryInputError, "did you mean"),
        ({"where": pc.field("tokens") > 1}, hypaware.QueryInputError, "expected a filter"),
        ({"where": "tokns > 1"}, hypaware.QueryInputError, "did you mean 'tokens'"),
        ({"where": "tokens > 'many'"}, hypaware.QueryInputError, "'many' is not a value"),
        ({"where": 42}, hypaware.QueryInputError, "expected a filter"),
        ({"columns": ["row_id", "nope"]}, hypaware.QueryInputError, "no column 'nope'"),
        ({"keys": ["not-a-number"], "dataset": "numbers"}, hypaware.QueryInputError, "keys"),
        ({"limit": -1}, hypaware.QueryInputError, "limit"),
    ],
)
def test_bad_input_is_a_clear_typed_error(
    tmp_path: Path, kwargs: dict[str, object], error: type[Exception], match: str
) -> None:
    cfg = _archive(tmp_path, arch=parquet_sink(tmp_path / "out"), log=jsonl_sink(tmp_path / "l"))
    if kwargs.get("dataset") == "numbers":
        from hypaware.core.types import DatasetInfo

        cache = cache_for(cfg)
        cache.define_dataset(
            DatasetInfo(
                name="numbers",
                schema=pa.schema([("ts", pa.timestamp("us", tz="UTC")), ("k", pa.int64())]),
                time_column="ts",
                lookup_key="k",
            )
        )
    dataset = str(kwargs.pop("dataset", "events"))
    with pytest.raises(error, match=match):
        hypaware.query(cfg, dataset, **kwargs)  # type: ignore[arg-type]


def _unreachable(tmp_path: Path) -> hypaware.HypawareConfig:
    s3 = {
        "writer": "@hypaware/format-parquet",
        "destination": "@hypaware/s3",
        "config": {
            "bucket": "gone",
            "endpoint": f"http://127.0.0.1:{free_port()}",
            "allow_http": True,
            "region": "us-east-1",
            "access_key_id": "x",
            "secret_access_key": "y",
            "max_retries": 0,
            "retry_timeout": 1.0,
            "connect_timeout": 1.0,
        },
    }
    cfg = config(tmp_path, {"remote": s3})
    cache = cache_for(cfg)
    fill(cache, make_rows(0, 10))
    return cfg


def test_an_unreachable_sink_is_named_and_never_silently_partial(tmp_path: Path) -> None:
    cfg = _unreachable(tmp_path)
    with pytest.raises(hypaware.SourceUnreadableError, match="sink 'remote'") as info:
        hypaware.query(cfg, "events")
    assert info.value.part.startswith("sink 'remote'")


def test_allow_partial_returns_the_cache_with_a_warning(tmp_path: Path) -> None:
    cfg = _unreachable(tmp_path)
    with pytest.warns(CacheOnlyWarning, match="partial"):
        reader = hypaware.query(cfg, "events", allow_partial=True)
    assert ids(reader) == list(range(10))


def test_a_sink_that_cannot_be_built_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("HYP_QUERY_TEST_KEY", raising=False)
    s3 = {
        "writer": "@hypaware/format-parquet",
        "destination": "@hypaware/s3",
        "config": {
            "bucket": "b",
            "region": "us-east-1",
            "access_key_id": "${HYP_QUERY_TEST_KEY}",
            "secret_access_key": "${HYP_QUERY_TEST_KEY}",
        },
    }
    cfg = config(tmp_path, {"remote": s3})
    fill(cache_for(cfg), make_rows(0, 5))
    with pytest.raises(hypaware.SourceUnreadableError, match="sink 'remote'"):
        hypaware.query(cfg, "events")
    with pytest.warns(CacheOnlyWarning, match="partial"):
        assert ids(hypaware.query(cfg, "events", allow_partial=True)) == list(range(5))


def test_a_sink_started_without_backfill_leaves_older_rows_to_the_cache(tmp_path: Path) -> None:
    cfg = config(tmp_path, {"arch": parquet_sink(tmp_path / "out")})
    cache = cache_for(cfg)
    fill(cache, make_rows(0, 30))
    # A new sink starts at the newest partition: the older ones were never sent to it.
    export(cfg, cache, backfill=False)
    fill(cache, make_rows(30, 30, day=1))
    export(cfg, cache, backfill=False)
    plan, reader = _plan(cfg)
    assert ids(reader) == list(range(60))
    assert len(plan.sink_partitions) == 3  # type: ignore[attr-defined]
