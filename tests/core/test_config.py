from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypaware import ConfigError, Secret, dump_config, load_config
from hypaware.core.config import CacheConfig, HypawareConfig, SinkSpec

from .fakes import SPEC_EXAMPLE


def problems(exc: pytest.ExceptionInfo[ConfigError]) -> dict[str, str]:
    return {p.path: p.message for p in exc.value.problems}


def test_spec_example_loads_as_written() -> None:
    config = load_config(SPEC_EXAMPLE)
    archive, forward = config.sinks
    assert archive.name == "archive"
    assert archive.shape == "blob"
    assert archive.schedule == "0 * * * *"
    assert dict(archive.config) == {"bucket": "acme-hyp-archive"}
    assert forward.shape == "request"
    assert forward.plugin == "@hypaware/central"
    assert forward.schedule == "*/5 * * * *"


def test_defaults() -> None:
    config = load_config({"sinks": {"x": {"plugin": "p"}}})
    (spec,) = config.sinks
    assert spec.schedule == "*/5 * * * *"
    assert spec.datasets is None
    assert config.state_dir == ".hypaware"
    assert config.cache == CacheConfig()


def test_file_paths_are_relative_to_the_config_file(tmp_path: Path) -> None:
    path = tmp_path / "conf" / "hypaware.json"
    path.parent.mkdir()
    path.write_text(json.dumps({"state_dir": "state", "sinks": {}}))
    config = load_config(path)
    assert config.state_path == tmp_path / "conf" / "state"
    assert config.cache_path == tmp_path / "conf" / "cache"


@pytest.mark.parametrize(
    ("doc", "path", "fragment"),
    [
        ({"sinks": {"a": {"writer": "w", "destination": "d", "plugin": "p"}}}, "sinks.a", "both"),
        ({"sinks": {"a": {"config": {}}}}, "sinks.a", "neither"),
        ({"sinks": {"a": {"writer": "w"}}}, "sinks.a.destination", "missing"),
        (
            {"sinks": {"a": {"plugin": "p", "config": {"schedule": "* * *"}}}},
            "sinks.a.config.schedule",
            "5 fields",
        ),
        (
            {"sinks": {"a": {"plugin": "p", "config": {"schedule": "99 * * * *"}}}},
            "sinks.a.config.schedule",
            "not a valid cron",
        ),
        (
            {"sinks": {"a": {"plugin": "p", "config": {"schedule": "0 0 30 2 *"}}}},
            "sinks.a.config.schedule",
            "never fires",
        ),
        (
            {"sinks": {"a": {"plugin": "p", "config": {"schedule": 5}}}},
            "sinks.a.config.schedule",
            "expected a string",
        ),
        (
            {"sinks": {"a": {"plugin": "p", "config": {"max_batch_rows": "10"}}}},
            "sinks.a.config.max_batch_rows",
            "expected an integer, got a string",
        ),
        (
            {"sinks": {"a": {"plugin": "p", "config": {"max_batch_rows": 2.5}}}},
            "sinks.a.config.max_batch_rows",
            "expected an integer",
        ),
        (
            {"sinks": {"a": {"plugin": "p", "config": {"max_batch_rows": True}}}},
            "sinks.a.config.max_batch_rows",
            "boolean",
        ),
        (
            {"sinks": {"a": {"plugin": "p", "config": {"max_batch_rows": -1}}}},
            "sinks.a.config.max_batch_rows",
            "positive",
        ),
        ({"sinks": {"a": {"plugin": "p", "confg": {}}}}, "sinks.a.confg", "did you mean 'config'"),
        ({"sinks": {"a": {"plugin": 7}}}, "sinks.a.plugin", "plugin name"),
        (
            {"sinks": {"a": {"plugin": "p", "config": []}}},
            "sinks.a.config",
            "expected an object, got a list",
        ),
        ({"sinks": {"a": "s3"}}, "sinks.a", "expected an object, got a string"),
        ({"sinks": []}, "sinks", "expected an object"),
        ({"snks": {}}, "snks", "did you mean 'sinks'"),
        ({"cache": {"pth": "x"}}, "cache.pth", "did you mean 'path'"),
        ({"state_dir": ""}, "state_dir", "non-empty"),
        ({"sinks": {"a": {"plugin": "p", "encoder": "e"}}}, "sinks.a.encoder", "only blob sinks"),
    ],
)
def test_bad_documents_name_the_path(doc: dict[str, Any], path: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config(doc)
    found = problems(exc)
    assert path in found, found
    assert fragment in found[path]


def test_every_problem_is_reported_at_once() -> None:
    doc = {
        "sinks": {
            "a": {"plugin": "p", "config": {"schedule": "nope"}},
            "b": {"writer": "w", "plugin": "p"},
            "c": {"destination": "d"},
        },
        "extra": 1,
    }
    with pytest.raises(ConfigError) as exc:
        load_config(doc)
    assert set(problems(exc)) == {"extra", "sinks.a.config.schedule", "sinks.b", "sinks.c.writer"}
    assert len(str(exc.value).splitlines()) == 4


def test_malformed_json_is_a_config_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"sinks": {"a": ')
    with pytest.raises(ConfigError, match=r"not valid JSON.*line 1"):
        load_config(path)


def test_missing_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "nope.json")


def test_top_level_must_be_an_object(tmp_path: Path) -> None:
    path = tmp_path / "list.json"
    path.write_text("[]")
    with pytest.raises(ConfigError, match="must be a JSON object"):
        load_config(path)


def test_duplicate_sink_names_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "dupe.json"
    path.write_text(
        '{"sinks": {"a": {"plugin": "p"}, "a": {"plugin": "q"}},'
        ' "cache": {"path": "x", "path": "y"}}'
    )
    with pytest.raises(ConfigError) as exc:
        load_config(path)
    found = problems(exc)
    assert "duplicate sink name 'a'" in found["sinks.a"]
    assert "duplicate key 'path'" in found["cache.path"]


def test_sink_spec_repr_hides_plugin_values() -> None:
    config = load_config({"sinks": {"a": {"plugin": "p", "config": {"token": "s3cr3t-value"}}}})
    assert "s3cr3t-value" not in repr(config)
    assert "'token'" in repr(config)


def test_secret_never_shows_its_value() -> None:
    literal = Secret("hunter2")
    ref = Secret("${HYP_TOKEN}")
    for text in (repr(literal), str(literal), f"{literal}", repr([literal])):
        assert "hunter2" not in text
    assert repr(ref) == "Secret(${HYP_TOKEN})"
    assert literal.reveal() == "hunter2"
    assert ref.reveal({"HYP_TOKEN": "abc"}) == "abc"
    with pytest.raises(ConfigError, match="HYP_TOKEN is not set") as exc:
        ref.reveal({}, path="sinks.f.config.token")
    assert exc.value.problems[0].path == "sinks.f.config.token"


names = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=1, max_size=12)
plugin_names = st.sampled_from(["@hypaware/s3", "@hypaware/format-parquet", "@acme/x", "p"])
schedules = st.sampled_from(["*/5 * * * *", "0 * * * *", "0 2 * * *", "15 3 * * 1-5"])
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(names, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def sink_specs(draw: st.DrawFn, name: str) -> SinkSpec:
    blob = draw(st.booleans())
    plugin_config = draw(
        st.dictionaries(
            names.filter(
                lambda k: (
                    k
                    not in {
                        "schedule",
                        "datasets",
                        "max_batch_rows",
                        "max_batch_bytes",
                        "export_timeout",
                    }
                )
            ),
            json_values,
            max_size=4,
        )
    )
    return SinkSpec(
        name=name,
        writer=draw(plugin_names) if blob else None,
        destination=draw(plugin_names) if blob else None,
        encoder=draw(st.none() | plugin_names) if blob else None,
        plugin=None if blob else draw(plugin_names),
        config=plugin_config,
        schedule=draw(schedules),
        datasets=draw(st.none() | st.lists(names, max_size=3).map(tuple)),
        max_batch_rows=draw(st.integers(1, 10**9)),
        max_batch_bytes=draw(st.integers(1, 10**12)),
        export_timeout=draw(st.floats(0.5, 1e5)),
    )


@st.composite
def configs(draw: st.DrawFn) -> HypawareConfig:
    sink_names = draw(st.lists(names, unique=True, max_size=4))
    specs = tuple(sorted((draw(sink_specs(n)) for n in sink_names), key=lambda s: s.name))
    return HypawareConfig(
        sinks=specs,
        cache=CacheConfig(path=draw(names)),
        state_dir=draw(names),
    )


@given(configs())
def test_config_round_trips(config: HypawareConfig) -> None:
    assert load_config(dump_config(config)) == config
    # and through JSON text, as users store it
    assert load_config(json.loads(json.dumps(dump_config(config)))) == config
