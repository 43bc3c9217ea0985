"""A wrong manifest or factory fails when the plugin registers, naming the plugin and field."""

from __future__ import annotations

from importlib import metadata
from typing import Any

import attrs
import pytest
from hypothesis import given
from hypothesis import strategies as st

from hypaware import PluginError, PluginManifest, Registry
from hypaware.core.manifest import CAPABILITIES, FEATURES

from .test_registry import ep, fake_entry_points


@attrs.frozen
class GoodConfig:
    path: str = "x"


@attrs.frozen
class OtherConfig:
    n: int = 1


def good_sink(config: GoodConfig, ctx: Any) -> object:
    return object()


def one_arg(config: GoodConfig) -> object:
    return object()


def table_without_store(config: Any, ctx: Any, *, encoder: Any) -> object:
    return object()


def table_factory(config: Any, ctx: Any, *, store: Any, encoder: Any) -> object:
    return object()


NOT_CALLABLE = 42

GOOD = PluginManifest(
    name="@t/good", kind="sink", factory=f"{__name__}:good_sink", config_class=GoodConfig
)
ONE_ARG = PluginManifest(name="@t/one-arg", kind="sink", factory=f"{__name__}:one_arg")
NO_STORE = PluginManifest(
    name="@t/no-store", kind="table-format", factory=f"{__name__}:table_without_store"
)
TABLE = PluginManifest(name="@t/table", kind="table-format", factory=f"{__name__}:table_factory")
WRONG_CONFIG = PluginManifest(
    name="@t/wrong-config", kind="sink", factory=f"{__name__}:good_sink", config_class=OtherConfig
)
UNCALLABLE = PluginManifest(name="@t/uncallable", kind="sink", factory=f"{__name__}:NOT_CALLABLE")
MISSING = PluginManifest(name="@t/missing", kind="sink", factory=f"{__name__}:nowhere")


def register(monkeypatch: pytest.MonkeyPatch, *names: str) -> Registry:
    eps = [ep(f"@t/{n}", f"{__name__}:{n.upper().replace('-', '_')}") for n in names]
    monkeypatch.setattr(metadata, "entry_points", fake_entry_points(*eps))
    return Registry.from_entry_points()


def test_good_factories_register(monkeypatch: pytest.MonkeyPatch) -> None:
    assert sorted(register(monkeypatch, "good", "table")) == ["@t/good", "@t/table"]


@pytest.mark.parametrize(
    ("name", "fragments"),
    [
        ("one-arg", ["plugin @t/one-arg: factory", "factory(config, ctx)", "too many"]),
        ("no-store", ["plugin @t/no-store", "factory(config, ctx, store=..., encoder=...)"]),
        ("wrong-config", ["plugin @t/wrong-config: config_class is OtherConfig", "GoodConfig"]),
        ("uncallable", ["plugin @t/uncallable: factory", "is a int, not a callable"]),
        ("missing", ["cannot find factory of plugin @t/missing"]),
    ],
)
def test_a_wrong_factory_fails_at_registration(
    monkeypatch: pytest.MonkeyPatch, name: str, fragments: list[str]
) -> None:
    with pytest.raises(PluginError) as caught:
        register(monkeypatch, "good", name)
    message = str(caught.value)
    assert f"entry point '@t/{name}'" in message
    for fragment in fragments:
        assert fragment in message
    assert "@t/good" not in message  # only the broken plugin is named


@pytest.mark.parametrize(
    ("field", "value", "fragment"),
    [
        ("provides", {"hypaware.blob-stor"}, "did you mean 'hypaware.blob-store'?"),
        ("requires", {"acme.queue"}, "requires: unknown tag(s) 'acme.queue'"),
        ("supports", "queriable", "did you mean 'queryable'?"),
        ("config_class", dict, "config_class <class 'dict'> is not an attrs class"),
        ("config_class", GoodConfig(), "is not an attrs class"),
    ],
)
def test_a_wrong_manifest_field_is_named(field: str, value: Any, fragment: str) -> None:
    with pytest.raises(PluginError) as caught:
        PluginManifest(name="@t/bad", kind="sink", factory="m:f", **{field: value})
    assert str(caught.value).startswith(f"plugin @t/bad: {field}")
    assert fragment in str(caught.value)


@given(st.sets(st.sampled_from(sorted(CAPABILITIES))), st.sets(st.sampled_from(sorted(FEATURES))))
def test_known_tags_are_accepted(provides: set[Any], supports: set[Any]) -> None:
    m = PluginManifest(
        name="@t/ok", kind="encoder", factory="m:f", provides=provides, supports=supports
    )
    assert m.provides == frozenset(provides) | {"hypaware.encoder"}
    assert m.supports == frozenset(supports)


@given(st.text(min_size=1, max_size=20).filter(lambda t: t not in CAPABILITIES))
def test_any_unknown_capability_is_refused(tag: str) -> None:
    with pytest.raises(PluginError, match="plugin @t/x: provides: unknown tag"):
        PluginManifest(name="@t/x", kind="sink", factory="m:f", provides={tag})


def test_a_hand_built_plugin_is_checked_when_built(tmp_path: Any) -> None:
    with pytest.raises(PluginError, match="plugin @t/one-arg: factory"):
        ONE_ARG.load_factory()
    assert callable(GOOD.load_factory())


def test_check_config_names_the_plugin_with_a_wrong_factory(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    from hypaware.cli import main

    monkeypatch.setattr(
        metadata, "entry_points", fake_entry_points(ep("@t/one-arg", f"{__name__}:ONE_ARG"))
    )
    path = tmp_path / "hypaware.json"
    path.write_text('{"sinks": {"s": {"plugin": "@t/one-arg"}}}')
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "plugin @t/one-arg: factory" in err and "factory(config, ctx)" in err
