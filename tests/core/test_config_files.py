"""Config as people write it: TOML or JSON files, and ``${NAME}`` in every string value."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypaware import (
    BlobPlan,
    ConfigError,
    RequestPlan,
    Secret,
    dump_config,
    load_config,
    resolve,
)
from hypaware.core.config import CacheConfig, HypawareConfig, SinkSpec
from hypaware.core.config_loader import dump_config_text
from hypaware.core.interpolation import escape, expand, references
from hypaware.core.registry import Registry

from .test_config import configs, names, plugin_names, schedules

TOML_DOC = """\
state_dir = "${STATE:-.hypaware}"

[cache]
path = "cache"
retention_hours = 48

[sinks.archive]
writer = "@hypaware/format-parquet"
destination = "@hypaware/s3"

[sinks.archive.config]
bucket = "${BUCKET}"
prefix = "exports/${ENV:-dev}"
access_key_id = "${AWS_KEY_ID}"
secret_access_key = "${AWS_SECRET}"
schedule = "${SCHEDULE:-0 * * * *}"
"""


def test_a_toml_file_loads_like_the_same_json(tmp_path: Path) -> None:
    env = {"BUCKET": "acme-archive", "AWS_KEY_ID": "AKIA", "AWS_SECRET": "s3cr3t"}
    (tmp_path / "hypaware.toml").write_text(TOML_DOC)
    from_toml = load_config(tmp_path / "hypaware.toml", env=env)
    (tmp_path / "hypaware.json").write_text(json.dumps(dump_config(from_toml)))
    assert load_config(tmp_path / "hypaware.json", env=env) == from_toml
    assert from_toml.state_dir == ".hypaware"
    assert from_toml.cache.retention_hours == 48
    (archive,) = from_toml.sinks
    assert archive.schedule == "0 * * * *"
    # Plugin keys stay as written until the resolver knows their types.
    assert archive.config["bucket"] == "${BUCKET}"


def test_the_resolver_expands_plugin_strings_and_keeps_secrets_as_references(
    tmp_path: Path,
) -> None:
    env = {"BUCKET": "acme-archive", "AWS_KEY_ID": "AKIA", "AWS_SECRET": "s3cr3t", "ENV": "prod"}
    (tmp_path / "hypaware.toml").write_text(TOML_DOC)
    config = load_config(tmp_path / "hypaware.toml", env=env)
    (plan,) = resolve(config, Registry.from_entry_points(), env=env)
    assert isinstance(plan, BlobPlan)
    s3 = plan.destination.config
    assert s3.bucket == "acme-archive"
    assert s3.prefix == "exports/prod"
    assert s3.secret_access_key == Secret("${AWS_SECRET}")
    assert "s3cr3t" not in repr(plan)
    assert s3.secret_access_key.reveal(env) == "s3cr3t"


def test_a_container_of_secrets_keeps_its_references() -> None:
    doc = {
        "sinks": {
            "hook": {
                "plugin": "@hypaware/webhook",
                "config": {
                    "url": "https://hooks.example/${PATH_PART:-in}",
                    "signing_secret": "${HOOK_KEY}",
                    "headers": {"X-Tenant": "${TENANT}"},
                },
            }
        }
    }
    (plan,) = resolve(doc, Registry.from_entry_points(), env={})
    assert isinstance(plan, RequestPlan)
    webhook = plan.plugin.config
    assert webhook.url == "https://hooks.example/in"
    assert webhook.headers == {"X-Tenant": Secret("${TENANT}")}


def test_an_unset_variable_is_a_config_error_naming_the_key(tmp_path: Path) -> None:
    (tmp_path / "hypaware.toml").write_text(TOML_DOC)
    env = {"AWS_KEY_ID": "AKIA", "AWS_SECRET": "s3cr3t"}
    config = load_config(tmp_path / "hypaware.toml", env=env)
    with pytest.raises(ConfigError) as info:
        resolve(config, Registry.from_entry_points(), env=env)
    (problem,) = info.value.problems
    assert problem.path == "sinks.archive.config.bucket"
    assert "BUCKET is not set" in problem.message
    # At load time too, for the keys hypaware types itself; every problem at once.
    doc = {
        "state_dir": "${NOPE}",
        "sinks": {"a": {"plugin": "p", "config": {"schedule": "${CRON}", "x": "${Y}"}}},
    }
    with pytest.raises(ConfigError) as info:
        load_config(doc, env={})
    paths = {p.path: p.message for p in info.value.problems}
    assert set(paths) == {"state_dir", "sinks.a.config.schedule"}
    assert "NOPE is not set" in paths["state_dir"]


def test_a_secret_reference_unset_at_build_names_the_key_and_no_value() -> None:
    secret = Secret("Bearer ${TOKEN}")
    assert secret.reveal({"TOKEN": "t0k"}) == "Bearer t0k"
    assert Secret("${TOKEN:-anon}").reveal({}) == "anon"
    with pytest.raises(ConfigError) as info:
        secret.reveal({}, path="sinks.f.config.token")
    assert info.value.problems[0].path == "sinks.f.config.token"
    assert "TOKEN is not set" in str(info.value)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${A}", "1"),
        ("x-${A}-${B}", "x-1-two"),
        ("${MISSING:-fallback}", "fallback"),
        ("${EMPTY:-fallback}", "fallback"),
        ("${A:-fallback}", "1"),
        ("${MISSING:-}", ""),
        ("$${A}", "${A}"),
        ("cost: 5$", "cost: 5$"),
        ("$$$${A}", "$${A}"),
        ("${MISSING:-a:-b}", "a:-b"),
        ("no references", "no references"),
    ],
)
def test_expansion_examples(text: str, expected: str) -> None:
    assert expand(text, {"A": "1", "B": "two", "EMPTY": ""}) == expected


@pytest.mark.parametrize("text", ["${}", "${1A}", "${A B}", "open ${A", "${-x}"])
def test_malformed_references_are_refused(text: str) -> None:
    with pytest.raises(ConfigError, match="malformed reference") as info:
        expand(text, {"A": "1"}, path="sinks.a.config.k")
    assert info.value.problems[0].path == "sinks.a.config.k"


text = st.text(st.characters(exclude_categories=["Cs"]), max_size=30)


@given(text)
def test_escaped_text_expands_to_itself(value: str) -> None:
    assert expand(escape(value), {}) == value
    assert references(escape(value)) == []


@given(text, st.dictionaries(st.from_regex(r"[A-Z_][A-Z0-9_]{0,5}", fullmatch=True), text))
def test_a_value_is_inserted_as_is_and_never_expanded_again(
    value: str, env: dict[str, str]
) -> None:
    env = {**env, "V": value}
    assert expand("<${V}>", env) == f"<{value}>"


def test_unknown_extension_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "hypaware.yaml"
    path.write_text("sinks: {}")
    with pytest.raises(ConfigError, match=r"unknown extension '\.yaml'.*\.toml or \.json"):
        load_config(path)


def test_invalid_toml_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "hypaware.toml"
    path.write_text('state_dir = "a"\nstate_dir = "b"\n')
    with pytest.raises(ConfigError, match=r"hypaware\.toml: not valid TOML.*line 2"):
        load_config(path)


def test_toml_cannot_write_a_null_that_is_not_a_default() -> None:
    config = HypawareConfig(sinks=(), cache=CacheConfig(retention_hours=None))
    with pytest.raises(ConfigError) as info:
        dump_config_text(config, "toml")
    assert info.value.problems[0].path == "cache.retention_hours"
    assert "null" in str(info.value)
    assert load_config(json.loads(dump_config_text(config, "json"))) == config


# ------------------------------------------------------------------ round trips

free_text = st.text(st.characters(exclude_categories=["Cs"]), min_size=1, max_size=20)
# Local paths refuse control characters (check-config reports them), so paths draw none.
path_text = st.text(st.characters(exclude_categories=["Cs", "Cc"]), min_size=1, max_size=20)
toml_values = st.recursive(
    st.booleans() | st.integers(-(2**63), 2**63 - 1) | free_text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(free_text, inner, max_size=3),
    max_leaves=8,
)


@st.composite
def toml_configs(draw: st.DrawFn) -> HypawareConfig:
    """Configs TOML can hold: any text (``$``, quotes, controls, non-ASCII), no nulls."""
    specs = []
    for name in draw(st.lists(names, unique=True, max_size=3)):
        blob = draw(st.booleans())
        specs.append(
            SinkSpec(
                name=name,
                writer=draw(plugin_names) if blob else None,
                destination=draw(plugin_names) if blob else None,
                plugin=None if blob else draw(plugin_names),
                config=draw(
                    st.dictionaries(
                        names.filter(lambda k: k != "schedule"), toml_values, max_size=3
                    )
                ),
                schedule=draw(schedules),
                datasets=draw(st.none() | st.lists(free_text, max_size=3).map(tuple)),
            )
        )
    return HypawareConfig(
        sinks=tuple(sorted(specs, key=lambda s: s.name)),
        cache=CacheConfig(path=draw(path_text), max_bytes=draw(st.none() | st.integers(1, 2**40))),
        state_dir=draw(path_text),
    )


@given(toml_configs())
def test_toml_and_json_files_round_trip(config: HypawareConfig) -> None:
    for fmt in ("toml", "json"):
        written = dump_config_text(config, fmt)
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / f"hypaware.{fmt}"
            path.write_text(written, encoding="utf-8")
            loaded = load_config(path, env={})
        assert attrs.evolve(loaded, base_dir=None) == config, written


@given(configs())
def test_json_text_round_trips_configs_with_nulls(config: HypawareConfig) -> None:
    assert load_config(json.loads(dump_config_text(config, "json")), env={}) == config
