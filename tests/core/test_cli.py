from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from hypaware import __version__
from hypaware.cli import main


def write(tmp_path: Path, doc: object, name: str = "hypaware.json") -> str:
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    assert capsys.readouterr().out.strip() == f"hypaware {__version__}"


def test_no_command_prints_help(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "check-config" in capsys.readouterr().err


def test_check_config_accepts_a_valid_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path,
        {"sinks": {"log": {"plugin": "@acme/rowlog", "config": {"schedule": "0 2 * * *"}}}},
    )
    assert main(["check-config", path]) == 0
    out = capsys.readouterr().out
    assert out.startswith("log: request sink, @acme/rowlog, schedule '0 2 * * *', next ")
    assert "T02:00:00Z" in out
    assert "not queryable" in out


def test_check_config_lists_every_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(
        tmp_path,
        {
            "sinks": {
                "a": {"plugin": "@acme/rowlg"},
                "b": {"plugin": "@acme/rowlog", "config": {"pth": "x"}},
            }
        },
    )
    assert main(["check-config", path]) == 2
    err = capsys.readouterr().err.splitlines()
    assert err == [
        f"hypaware check-config: error: {path}: sinks.a.plugin: unknown plugin '@acme/rowlg' (did you mean '@acme/rowlog'?)",
        f"hypaware check-config: error: {path}: sinks.b.config.pth: unknown key for @acme/rowlog (did you mean 'path'?)",
    ]


def test_check_config_reports_shape_errors_before_plugins(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, {"sinks": {"a": {"plugin": "@acme/rowlog", "writer": "w"}}})
    assert main(["check-config", path]) == 2
    assert "has both shapes" in capsys.readouterr().err


def test_check_config_malformed_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{")
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "not valid JSON" in err
    assert "Traceback" not in err


def test_plugins_lists_third_party_with_distribution(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plugins"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["NAME", "KIND", "PROVIDES", "REQUIRES", "SUPPORTS", "FROM"]
    row = next(line for line in lines if line.startswith("@acme/rowlog"))
    assert row.split() == [
        "@acme/rowlog",
        "sink",
        "hypaware.sink",
        "-",
        "-",
        "hypaware-acme-test-plugin",
    ]


def test_console_script_runs() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "hypaware", "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 0
    assert proc.stdout.strip() == f"hypaware {__version__}"
