"""Every command, driven through one matrix: the same shape wherever a user meets it.

The commands come from the CLI itself (`hypaware.cli.COMMANDS`) and each
one's options from its own parser, so a new command or option joins the
matrix, or fails it, without this file being told.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pytest

from hypaware.cli import COMMANDS, main, make_parser

from .helpers import make_cache

# What each command needs besides its config to do its ordinary job here.
BASE_ARGS: dict[str, list[str]] = {
    "check-config": [],
    "plugins": [],
    "export": ["--once"],
    "status": [],
    "retry": ["--all"],
    "reset-progress": ["--sink", "a", "--from", "now", "--yes"],
    "maintain": [],
    "query": ["events", "--limit", "3"],
    "demo": ["--dir", "{tmp}/demo"],
}
NAMES = [name.replace("_", "-") for name in COMMANDS]


def options(command: str) -> dict[str, argparse.Action]:
    parser = make_parser(only=command)
    (sub,) = (a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {o: a for a in sub.choices[command]._actions for o in a.option_strings}


def argv(command: str, tmp: Path, *extra: str) -> list[str]:
    return [command, *(a.replace("{tmp}", str(tmp)) for a in BASE_ARGS[command]), *extra]


SINK = {"writer": "@hypaware/format-parquet", "destination": "@hypaware/local-fs"}
TOML = """\
state_dir = "state"

[cache]
path = "cache"

[sinks.a]
writer = "@hypaware/format-parquet"
destination = "@hypaware/local-fs"
config = { root = "out-a" }

[sinks.b]
writer = "@hypaware/format-parquet"
destination = "@hypaware/local-fs"
config = { root = "out-b" }
"""


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Two local Parquet sinks over one cache, exported once (so `status` has a store)."""
    make_cache(tmp_path / "cache", count=20, retention=None)
    doc = {
        "state_dir": "state",
        "cache": {"path": "cache"},
        "sinks": {n: {**SINK, "config": {"root": f"out-{n}"}} for n in ("a", "b")},
    }
    (tmp_path / "hypaware.json").write_text(json.dumps(doc))
    (tmp_path / "hypaware.toml").write_text(TOML)
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("HYPAWARE_CONFIG", raising=False)
    assert main(["export", "--config", "hypaware.json", "--once", "--backfill"]) == 0
    return tmp_path


def run(capsys: pytest.CaptureFixture[str], args: list[str]) -> tuple[int, str, str]:
    code = main(args)
    out, err = capsys.readouterr()
    return code, out, err


def test_the_matrix_names_every_command() -> None:
    assert set(BASE_ARGS) == set(NAMES)


@pytest.mark.parametrize("command", NAMES)
def test_help_names_the_config_file_alike(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    if "--config" in options(command):
        assert "--config FILE config file (TOML or JSON; default: $HYPAWARE_CONFIG)" in text
    assert "JSON config" not in text


def sources() -> list[tuple[str, str]]:
    """Each command with each place a config can come from; one run for those that read none."""
    return [
        (n, source)
        for n in NAMES
        for source in (("flag-json", "flag-toml", "env") if "--config" in options(n) else ("none",))
    ]


@pytest.mark.parametrize(("command", "source"), sources())
def test_every_command_runs_from_either_format_and_the_environment(
    command: str,
    source: str,
    home: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    extra: list[str] = []
    if source != "none":
        if source == "env":
            monkeypatch.setenv("HYPAWARE_CONFIG", str(home / "hypaware.toml"))
        else:
            extra = ["--config", "hypaware.toml" if source == "flag-toml" else "hypaware.json"]
    code, _out, err = run(capsys, argv(command, home, *extra))
    assert code == 0, (command, source, err)
    assert "error" not in err.lower(), err


@pytest.mark.parametrize("command", [n for n in NAMES if "--config" in options(n)])
@pytest.mark.parametrize("problem", ["missing", "unreadable", "unknown-key"])
def test_a_bad_config_is_exit_2_with_the_commands_prefix(
    command: str,
    problem: str,
    home: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = home / "bad.json"
    if problem == "unreadable":
        path.write_text("{not json")
    elif problem == "unknown-key":
        path.write_text(json.dumps({"cache": {"path": "cache"}, "sinks": {}, "sinkz": {}}))
    # From the environment, so every command's $HYPAWARE_CONFIG is held to the same rule.
    monkeypatch.setenv("HYPAWARE_CONFIG", str(path))
    code, out, err = run(capsys, argv(command, home))
    assert code == 2, (command, problem, out, err)
    assert err.startswith(f"hypaware {command}: error:"), err
    assert "bad.json" in err, err
    assert "Traceback" not in err


@pytest.mark.parametrize("command", [n for n in NAMES if "--sink" in options(n)])
def test_every_sink_option_takes_it_repeated_and_never_drops_one(
    command: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = [a for a in argv(command, home) if a not in ("--sink", "a")]
    config = ["--config", "hypaware.json"]
    # A misspelt name anywhere in the list stops the command, naming it.
    code, out, err = run(capsys, [*base, *config, "--sink", "a", "--sink", "nope"])
    assert code == 2, (command, out, err)
    assert err.startswith(f"hypaware {command}: error:") and "'nope'" in err, err
    # Two good names: both are honoured, or (a command that reads one sink) refused,
    # naming both; never the last one alone.
    code, out, err = run(capsys, [*base, *config, "--sink", "a", "--sink", "b"])
    if code == 0:
        assert isinstance(options(command)["--sink"], argparse._AppendAction)
        if command == "export":
            doc: dict[str, Any] = json.loads(out)
            assert set(doc["sinks"]) == {"a", "b"}
        elif command == "reset-progress":
            assert "sink a: progress reset" in out and "sink b: progress reset" in out, out
        elif command == "maintain":
            # Parquet sinks have nothing to maintain: both are named as skipped.
            assert json.loads(out)["skipped"] == ["a", "b"], out
        else:
            # Nothing parked to put back: the command's own tests check what it prints.
            assert command == "retry" and json.loads(out)["retried"] == 0, (command, out)
    else:
        assert code == 2
        assert err.startswith(f"hypaware {command}: error:"), err
        assert "'a'" in err and "'b'" in err, err


@pytest.mark.parametrize("command", [n for n in NAMES if "--json" in options(n)])
def test_json_output_is_one_document(
    command: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    extra = ["--config", "hypaware.json"] if "--config" in options(command) else []
    code, out, err = run(capsys, argv(command, home, *extra, "--json"))
    assert code == 0, err
    json.loads(out)
