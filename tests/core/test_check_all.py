"""``check-config`` reports every problem of a config in one run.

Schedules, keys of every plugin (every failing validator, not the first),
the cross-key rules, pairs, manifests (tags, factory paths), missing extras
and names: all in one list, from `check_config` and from the command.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from hypaware import ConfigError, PluginError, PluginManifest, Registry, resolve
from hypaware.cli import main
from hypaware.core.checks import check_config
from hypaware.core.manifest import BLOB_STORE

MISTAKES = {
    "state_dir": "state",
    "sinks": {
        "archive": {
            "writer": "@hypaware/format-jsonl",
            "destination": "@hypaware/local-fs",
            "config": {"rooot": "export", "compression": "zstd", "schedule": "every hour"},
        },
        "hook": {
            "plugin": "@hypaware/webhook",
            "config": {"url": "http://example.com/in", "max_chunk_rows": -1, "connect_timeout": 0},
        },
        "mixed": {"writer": "@hypaware/format-parquet", "destination": "@hypaware/webhook"},
        "..": {"plugin": "@hypaware/central", "config": {"endpoint": "https://c.example"}},
    },
}

# (key path, a word of the message): one per independent mistake above.
EXPECTED = [
    ("sinks.archive.config.schedule", "5 fields"),
    ("sinks.archive.config.rooot", "did you mean 'root'"),
    ("sinks.archive.config.compression", "hypaware[zstd]"),
    ("sinks.hook.config.max_chunk_rows", "at least 1"),
    ("sinks.hook.config.connect_timeout", "positive"),
    ("sinks.hook.config", "plain http"),
    ("sinks.mixed", "requires hypaware.blob-store"),
    ("sinks...", "reserved"),
]


@pytest.fixture
def no_zstandard(monkeypatch: pytest.MonkeyPatch) -> None:
    # None in sys.modules is how Python spells "not installed" to find_spec and import.
    monkeypatch.setitem(sys.modules, "zstandard", None)


@pytest.mark.usefixtures("no_zstandard")
def test_one_check_config_run_lists_every_mistake(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hypaware.json"
    path.write_text(json.dumps(MISTAKES))
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    lines = err.splitlines()
    for where, word in EXPECTED:
        assert any(f"{path}: {where}: " in line and word in line for line in lines), (
            f"{where} ({word}) missing from:\n{err}"
        )
    assert all(line.startswith(f"hypaware check-config: error: {path}: ") for line in lines)
    # Nothing was created next to the config.
    assert [p.name for p in tmp_path.iterdir()] == ["hypaware.json"]


@pytest.mark.usefixtures("no_zstandard")
def test_json_output_lists_the_same_problems(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hypaware.json"
    path.write_text(json.dumps(MISTAKES))
    assert main(["check-config", "--json", "--config", str(path)]) == 2
    doc = json.loads(capsys.readouterr().out)
    assert doc["ok"] is False
    found = {(p["path"], p["message"]) for p in doc["problems"]}
    for where, word in EXPECTED:
        assert any(p == where and word in m for p, m in found), where


@pytest.mark.usefixtures("no_zstandard")
@pytest.mark.parametrize("command", [["status"], ["export", "--once"], ["query", "events"]])
def test_other_commands_run_the_same_checks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    path = tmp_path / "hypaware.json"
    path.write_text(json.dumps(MISTAKES))
    assert main([command[0], "--config", str(path), *command[1:]]) == 2
    err = capsys.readouterr().err
    for where, _word in EXPECTED:
        assert f"{path}: {where}: " in err
    assert [p.name for p in tmp_path.iterdir()] == ["hypaware.json"]


def test_config_from_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "hypaware.json"
    path.write_text(json.dumps({"sinks": {}}))
    monkeypatch.setenv("HYPAWARE_CONFIG", str(path))
    assert main(["check-config"]) == 0
    assert "valid, no sinks configured" in capsys.readouterr().out
    monkeypatch.delenv("HYPAWARE_CONFIG")
    assert main(["status"]) == 2
    assert "hypaware status: error: no config: give --config FILE or set $HYPAWARE_CONFIG" in (
        capsys.readouterr().err
    )


def test_every_validator_of_one_plugin_is_reported() -> None:
    doc = {
        "sinks": {
            "c": {
                "plugin": "@hypaware/central",
                "config": {
                    "endpoint": "https://c.example",
                    "max_chunk_rows": 0,
                    "read_timeout": -1,
                    "max_attempts": 0,
                    "backoff_budget": -5,
                },
            }
        }
    }
    with pytest.raises(ConfigError) as exc:
        resolve(doc)
    paths = {p.path for p in exc.value.problems}
    assert {
        "sinks.c.config.max_chunk_rows",
        "sinks.c.config.read_timeout",
        "sinks.c.config.max_attempts",
        "sinks.c.config.backoff_budget",
    } <= paths


# ------------------------------------------------------------ manifests


class _Config:
    pass


def _factory() -> None:
    return None


def test_unknown_tags_are_refused_naming_the_plugin_with_did_you_mean() -> None:
    # A manifest is checked when it is made, so a typo fails at registration,
    # before any config names the plugin.
    with pytest.raises(PluginError, match=r"@acme/enc: supports: .*'queryabel' \(did you mean"):
        PluginManifest(
            name="@acme/enc",
            kind="encoder",
            factory="tests.core.test_check_all:_factory",
            supports={"queryabel"},  # type: ignore[arg-type]
        )
    with pytest.raises(PluginError, match=r"provides: .*did you mean 'hypaware\.blob-store'"):
        PluginManifest(
            name="@acme/store",
            kind="destination",
            factory="tests.core.test_check_all:_factory",
            provides={"hypaware.blob-stor"},  # type: ignore[arg-type]
        )


def test_bad_factory_paths_are_problems_with_did_you_mean() -> None:
    encoder = PluginManifest(
        name="@acme/enc", kind="encoder", factory="tests.core.test_check_all:_factroy"
    )
    store = PluginManifest(
        name="@acme/store", kind="destination", factory="tests.core.test_chek_all:_factory"
    )
    registry = Registry([encoder, store])
    doc = {"sinks": {"s": {"writer": "@acme/enc", "destination": "@acme/store"}}}
    with pytest.raises(ConfigError) as exc:
        check_config(doc, registry)
    text = str(exc.value)
    assert "has no '_factroy' (did you mean '_factory'?)" in text
    assert (
        "no module 'tests.core.test_chek_all' (did you mean 'tests.core.test_check_all'?)" in text
    )


def test_an_encoder_needs_a_blob_store_even_if_its_manifest_forgets() -> None:
    encoder = PluginManifest(name="@acme/enc", kind="encoder", factory="m:f")
    assert BLOB_STORE not in encoder.requires
    endpoint = PluginManifest(name="@acme/hook", kind="sink", factory="m:f")
    doc = {"sinks": {"s": {"writer": "@acme/enc", "destination": "@acme/hook"}}}
    with pytest.raises(ConfigError, match=r"writer @acme/enc requires hypaware\.blob-store"):
        resolve(doc, Registry([encoder, endpoint]))


def test_iceberg_without_pyiceberg_is_refused_naming_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(sys.modules, "pyiceberg", None)
    doc = {
        "sinks": {
            "lake": {
                "writer": "@hypaware/format-iceberg",
                "destination": "@hypaware/local-fs",
                "config": {"root": "lake"},
            }
        }
    }
    with pytest.raises(ConfigError, match=r"pip install 'hypaware\[iceberg\]'") as exc:
        check_config(doc)
    assert exc.value.problems[0].path == "sinks.lake"
