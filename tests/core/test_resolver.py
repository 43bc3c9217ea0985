from __future__ import annotations

import builtins
import io
import socket
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import hypaware
from hypaware import (
    BlobPlan,
    ConfigError,
    PluginError,
    PluginManifest,
    Registry,
    RequestPlan,
    build,
    load_config,
    resolve,
)
from hypaware.core.manifest import BLOB_STORE, ENCODER, HTTP_ENDPOINT, QUERYABLE, SINK, TABLE_FORMAT
from hypaware.core.schedule import check_schedule

from . import fakes
from .fakes import SPEC_EXAMPLE, RecordingSink


def messages(exc: pytest.ExceptionInfo[ConfigError]) -> list[str]:
    return [str(p) for p in exc.value.problems]


def test_spec_example_resolves() -> None:
    archive, forward = resolve(SPEC_EXAMPLE, fakes.registry())
    assert isinstance(archive, BlobPlan) and archive.shape == "blob"
    assert archive.writer.name == "@hypaware/format-iceberg"
    assert archive.destination.config == fakes.BucketConfig(bucket="acme-hyp-archive")
    # A table format gets its encoder from the registry: Iceberg writes Parquet.
    assert archive.encoder.name == "@hypaware/format-parquet"
    assert archive.encoder.config == fakes.ParquetConfig()
    assert archive.queryable
    assert isinstance(forward, RequestPlan) and forward.shape == "request"
    assert forward.plugin.config == fakes.EndpointConfig(endpoint="https://hypaware.acme.internal")
    assert not forward.queryable
    assert archive.describe() == (
        "@hypaware/format-iceberg on @hypaware/s3 (encoder @hypaware/format-parquet)"
    )


def test_each_shape_of_sink_resolves_to_its_own_plan() -> None:
    doc = {
        "sinks": {
            "pq": {"writer": "@hypaware/format-parquet", "destination": "@hypaware/local-fs"},
            "js": {
                "writer": "@hypaware/format-jsonl",
                "destination": "@hypaware/s3",
                "config": {"bucket": "b"},
            },
            "ice": {
                "writer": "@hypaware/format-iceberg",
                "destination": "@hypaware/s3",
                "config": {"bucket": "b"},
            },
            "fwd": {"plugin": "@hypaware/central", "config": {"endpoint": "https://c"}},
            "hook": {"plugin": "@hypaware/webhook", "config": {"endpoint": "https://h"}},
        }
    }
    plans = {p.name: p for p in resolve(doc, fakes.registry())}
    blobs = {n: p for n, p in plans.items() if isinstance(p, BlobPlan)}
    requests = {n: p for n, p in plans.items() if isinstance(p, RequestPlan)}
    assert sorted(blobs) == ["ice", "js", "pq"]
    assert sorted(requests) == ["fwd", "hook"]
    # A plan holds only its own shape's parts, none of them optional.
    for blob in blobs.values():
        assert not hasattr(blob, "plugin")
        assert blob.components[:2] == (blob.writer, blob.destination)
    for request in requests.values():
        assert not any(hasattr(request, f) for f in ("writer", "destination", "encoder"))
        assert request.components == (request.plugin,)
        assert request.describe() == request.plugin.name
    assert blobs["ice"].encoder.name == "@hypaware/format-parquet"
    assert blobs["ice"].components[2] == blobs["ice"].encoder
    assert blobs["pq"].encoder == blobs["pq"].writer and len(blobs["pq"].components) == 2
    # What both shapes have reads the same on either, through the SinkPlan union.
    for name, plan in plans.items():
        assert isinstance(plan, hypaware.SinkPlan)
        assert plan.name == plan.spec.name == name
        assert plan.schedule == plan.spec.schedule
        assert plan.shape == plan.spec.shape == ("blob" if name in blobs else "request")
        assert isinstance(plan.queryable, bool) and plan.describe()


# A valid sink of every first-party plugin that builds without the network.
BUILDABLE = {
    "parquet-local": {
        "writer": "@hypaware/format-parquet",
        "destination": "@hypaware/local-fs",
        "config": {"root": "out"},
    },
    "jsonl-memory": {"writer": "@hypaware/format-jsonl", "destination": "@hypaware/memory"},
    "iceberg-local": {
        "writer": "@hypaware/format-iceberg",
        "destination": "@hypaware/local-fs",
        "config": {"root": "warehouse", "namespace": "hyp"},
    },
    "central": {"plugin": "@hypaware/central", "config": {"endpoint": "https://c.example"}},
    "webhook": {"plugin": "@hypaware/webhook", "config": {"url": "https://h.example/in"}},
}


@pytest.mark.parametrize("name", sorted(BUILDABLE))
async def test_build_takes_every_valid_plan_of_either_shape(tmp_path: Path, name: str) -> None:
    from hypaware.blob.sink import BlobSink
    from hypaware.blob.table_sink import TableSink
    from hypaware.request.sink import RequestSink

    if name.startswith("iceberg"):
        pytest.importorskip("pyiceberg")
    config = load_config({"sinks": {name: BUILDABLE[name]}}, base_dir=str(tmp_path))
    (plan,) = resolve(config, Registry.from_entry_points(), env={})
    expected: type
    if isinstance(plan, RequestPlan):
        assert "plugin" in BUILDABLE[name]
        expected = RequestSink
    else:
        assert isinstance(plan, BlobPlan) and "writer" in BUILDABLE[name]
        expected = TableSink if name.startswith("iceberg") else BlobSink
    sink = build(plan, config=config, env={"HYP_CENTRAL_TOKEN": "tok"})
    try:
        assert isinstance(sink, expected)
    finally:
        await sink.close()


def test_build_refuses_what_is_not_a_plan() -> None:
    doc = {"sinks": {"s": {"plugin": "@hypaware/central", "config": {"endpoint": "https://c"}}}}
    (plan,) = resolve(doc, fakes.registry())
    with pytest.raises(TypeError, match="BlobPlan or a RequestPlan"):
        build(plan.spec)  # type: ignore[arg-type]


def test_parquet_on_webhook_is_rejected_with_the_spec_message() -> None:
    doc = {
        "sinks": {
            "bad": {
                "writer": "@hypaware/format-parquet",
                "destination": "@hypaware/webhook",
                "config": {"endpoint": "https://x"},
            }
        }
    }
    with pytest.raises(ConfigError) as exc:
        resolve(doc, fakes.registry())
    (message,) = messages(exc)
    assert "sink 'bad'" in message
    assert "writer @hypaware/format-parquet requires hypaware.blob-store" in message
    assert "destination @hypaware/webhook provides hypaware.http-endpoint" in message


def test_queryability_comes_from_the_pair() -> None:
    doc = {
        "sinks": {
            "pq": {"writer": "@hypaware/format-parquet", "destination": "@hypaware/local-fs"},
            "js": {"writer": "@hypaware/format-jsonl", "destination": "@hypaware/local-fs"},
        }
    }
    plans = {p.name: p for p in resolve(doc, fakes.registry())}
    assert plans["pq"].queryable
    assert not plans["js"].queryable


def test_config_keys_are_routed_to_the_plugins_that_declare_them() -> None:
    doc = {
        "sinks": {
            "a": {
                "writer": "@hypaware/format-parquet",
                "destination": "@hypaware/s3",
                "config": {"bucket": "b", "compression": "snappy", "region": "eu"},
            }
        }
    }
    (plan,) = resolve(doc, fakes.registry())
    assert isinstance(plan, BlobPlan)
    assert plan.destination.config == fakes.BucketConfig(bucket="b", region="eu")
    assert plan.writer.config == fakes.ParquetConfig(compression="snappy")


@pytest.mark.parametrize(
    ("sink", "path", "fragment"),
    [
        (
            {"writer": "@hypaware/format-parqet", "destination": "@hypaware/s3"},
            "sinks.x.writer",
            "did you mean '@hypaware/format-parquet'",
        ),
        ({"plugin": "@hypaware/centrl"}, "sinks.x.plugin", "did you mean '@hypaware/central'"),
        (
            {
                "writer": "@hypaware/format-parquet",
                "destination": "@hypaware/s3",
                "config": {"bucket": "b", "bukket": "c"},
            },
            "sinks.x.config.bukket",
            "did you mean 'bucket'",
        ),
        (
            {"writer": "@hypaware/format-parquet", "destination": "@hypaware/s3", "config": {}},
            "sinks.x.config.bucket",
            "required",
        ),
        (
            {
                "writer": "@hypaware/format-parquet",
                "destination": "@hypaware/s3",
                "config": {"bucket": 3},
            },
            "sinks.x.config.bucket",
            "expected a string, got a number",
        ),
        (
            {"plugin": "@hypaware/central", "config": {"endpoint": "https://x", "timeout": "5"}},
            "sinks.x.config.timeout",
            "expected a number",
        ),
        (
            {"plugin": "@hypaware/s3", "config": {"bucket": "b"}},
            "sinks.x.plugin",
            "not a request sink",
        ),
        (
            {"writer": "@hypaware/s3", "destination": "@hypaware/local-fs"},
            "sinks.x.writer",
            "a writer must provide",
        ),
        (
            {
                "writer": "@hypaware/format-iceberg",
                "destination": "@hypaware/s3",
                "encoder": "@hypaware/format-jsonl",
                "config": {"bucket": "b"},
            },
            "sinks.x.encoder",
            "accepts @hypaware/format-parquet",
        ),
        (
            {
                "writer": "@hypaware/format-parquet",
                "destination": "@hypaware/s3",
                "encoder": "@hypaware/format-jsonl",
                "config": {"bucket": "b"},
            },
            "sinks.x.encoder",
            "does not take an encoder",
        ),
    ],
)
def test_resolution_problems_name_the_path(sink: dict[str, Any], path: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as exc:
        resolve({"sinks": {"x": sink}}, fakes.registry())
    found = {p.path: p.message for p in exc.value.problems}
    assert path in found, found
    assert fragment in found[path]


def test_table_format_without_an_installed_encoder() -> None:
    registry = Registry([fakes.ICEBERG, fakes.S3])
    doc = {
        "sinks": {
            "x": {
                "writer": "@hypaware/format-iceberg",
                "destination": "@hypaware/s3",
                "config": {"bucket": "b"},
            }
        }
    }
    with pytest.raises(ConfigError, match="none of the encoders it accepts"):
        resolve(doc, registry)


def test_every_sink_problem_in_one_error() -> None:
    doc = {
        "sinks": {
            "a": {"writer": "@hypaware/format-parquet", "destination": "@hypaware/webhook"},
            "b": {"plugin": "@nope/nothing"},
            "c": {
                "writer": "@hypaware/format-parquet",
                "destination": "@hypaware/local-fs",
                "config": {"rooot": "x"},
            },
        }
    }
    with pytest.raises(ConfigError) as exc:
        resolve(doc, fakes.registry())
    assert {p.path for p in exc.value.problems} == {
        "sinks.a",
        "sinks.b.plugin",
        "sinks.c.config.rooot",
    }


# ------------------------------------------------------------ properties

# Capability tags are a closed set (Literal); unknown ones are refused by the manifest.
CAPS = [BLOB_STORE, ENCODER, HTTP_ENDPOINT, TABLE_FORMAT]


@st.composite
def writer_destination_pairs(draw: st.DrawFn) -> tuple[PluginManifest, PluginManifest]:
    requires = frozenset(
        draw(st.sets(st.sampled_from([BLOB_STORE, HTTP_ENDPOINT, TABLE_FORMAT]), min_size=1))
    )
    writer = PluginManifest(name="@w/writer", kind="encoder", factory="m:f", requires=requires)
    dest_kind = draw(st.sampled_from(["destination", "sink", "encoder"]))
    provides = frozenset(draw(st.sets(st.sampled_from(CAPS))))
    destination = PluginManifest(name="@d/dest", kind=dest_kind, factory="m:f", provides=provides)
    return writer, destination


@given(writer_destination_pairs())
def test_unsatisfied_pairs_are_rejected_naming_both_plugins(
    pair: tuple[PluginManifest, PluginManifest],
) -> None:
    writer, destination = pair
    doc = {"sinks": {"s": {"writer": writer.name, "destination": destination.name}}}
    # An encoder writes files: it needs a blob store whether or not it says so.
    missing = (writer.requires | {BLOB_STORE}) - destination.provides
    if not missing:
        (plan,) = resolve(doc, Registry([writer, destination]))
        assert isinstance(plan, BlobPlan) and plan.writer.manifest == writer
        return
    with pytest.raises(ConfigError) as exc:
        resolve(doc, Registry([writer, destination]))
    text = str(exc.value)
    assert "@w/writer" in text and "@d/dest" in text
    for cap in missing:
        assert f"requires {cap}" in text


cron_field = st.text(alphabet="0123456789*/,-LW#?HJANFEBMRPYUSOCTVDW", min_size=0, max_size=6)


@given(st.lists(cron_field, min_size=1, max_size=7).map(" ".join))
def test_schedules_croniter_rejects_are_rejected_naming_the_sink(expr: str) -> None:
    from croniter import croniter

    doc = {
        "sinks": {
            "nightly": {
                "plugin": "@hypaware/central",
                "config": {"endpoint": "https://x", "schedule": expr},
            }
        }
    }
    croniter_ok = len(expr.split()) == 5 and croniter.is_valid(expr)
    if croniter_ok and check_schedule(expr) is None:
        resolve(doc, fakes.registry())
        return
    with pytest.raises(ConfigError) as exc:
        resolve(doc, fakes.registry())
    (problem,) = exc.value.problems
    assert problem.path == "sinks.nightly.config.schedule"
    assert "sink 'nightly'" in problem.message


def _no_io(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError(f"resolve() did I/O: {args!r}")


@given(st.permutations(list(SPEC_EXAMPLE["sinks"].items())))
def test_resolve_does_no_io_and_ignores_key_order(items: list[tuple[str, Any]]) -> None:
    registry = fakes.registry()
    reference = resolve(SPEC_EXAMPLE, registry)
    doc = {"sinks": dict(items)}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(socket, "socket", _no_io)
        mp.setattr(socket, "create_connection", _no_io)
        mp.setattr(builtins, "open", _no_io)
        mp.setattr(io, "open", _no_io)
        mp.setattr(Path, "open", _no_io)
        plans = resolve(doc, registry)
    assert plans == reference


@given(st.permutations(["bucket", "region", "compression", "schedule"]))
def test_config_key_order_does_not_matter(order: list[str]) -> None:
    values = {"bucket": "b", "region": "eu", "compression": "lz4", "schedule": "0 * * * *"}
    doc = {
        "sinks": {
            "a": {
                "writer": "@hypaware/format-parquet",
                "destination": "@hypaware/s3",
                "config": {k: values[k] for k in order},
            }
        }
    }
    reference = {"sinks": {"a": {**doc["sinks"]["a"], "config": values}}}
    assert resolve(doc, fakes.registry()) == resolve(reference, fakes.registry())


# ----------------------------------------------------------------- build


def test_build_reads_secrets_from_the_environment(tmp_path: Path) -> None:
    doc = {
        "sinks": {
            "f": {
                "plugin": "@hypaware/central",
                "config": {"endpoint": "https://x", "token": "${HYP_CENTRAL_TOKEN}"},
            }
        }
    }
    config = load_config(doc, base_dir=str(tmp_path))
    (plan,) = resolve(config, fakes.registry())
    assert "HYP_CENTRAL_TOKEN" in repr(plan)
    sink = build(plan, config=config, env={"HYP_CENTRAL_TOKEN": "tok-123"})
    assert isinstance(sink, RecordingSink)
    assert sink.token == "tok-123"
    with pytest.raises(ConfigError) as exc:
        build(plan, config=config, env={})
    assert exc.value.problems[0].path == "sinks.f.config.token"
    assert "HYP_CENTRAL_TOKEN" in str(exc.value)


def test_literal_secret_is_hidden_in_plans() -> None:
    doc = {
        "sinks": {
            "f": {
                "plugin": "@hypaware/central",
                "config": {"endpoint": "https://x", "token": "tok-very-secret"},
            }
        }
    }
    (plan,) = resolve(doc, fakes.registry())
    assert "tok-very-secret" not in repr(plan)
    sink = build(plan, env={})
    assert sink.token == "tok-very-secret"


@pytest.mark.parametrize(
    ("plugin", "fragment"),
    [
        ("@test/not-a-sink", "returned a object, which is not a Sink"),
        ("@test/exploding", "failed to build: RuntimeError: cannot reach the control plane"),
    ],
)
def test_build_failures_name_the_sink_and_plugin(plugin: str, fragment: str) -> None:
    (plan,) = resolve({"sinks": {"s": {"plugin": plugin}}}, fakes.registry())
    with pytest.raises(PluginError) as exc:
        build(plan)
    assert "sink 's': " in str(exc.value)
    assert plugin in str(exc.value)
    assert fragment in str(exc.value)


def test_manifest_always_provides_its_kind() -> None:
    m = PluginManifest(name="@a/b", kind="table-format", factory="m:f")
    assert TABLE_FORMAT in m.provides
    assert SINK in PluginManifest(name="x", kind="sink", factory="m:f").provides
    assert QUERYABLE not in m.supports


@pytest.mark.parametrize(
    ("kwargs", "fragment"),
    [
        ({"name": "Bad Name"}, "is not valid"),
        ({"kind": "widget"}, "kind 'widget'"),
        ({"factory": "no-colon"}, "module:attribute"),
        ({"config_class": dict}, "attrs class"),
    ],
)
def test_bad_manifests_are_refused(kwargs: dict[str, Any], fragment: str) -> None:
    base: dict[str, Any] = {"name": "@a/b", "kind": "sink", "factory": "m:f"}
    with pytest.raises(PluginError, match=fragment):
        PluginManifest(**{**base, **kwargs})
