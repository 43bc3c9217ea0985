"""``hypaware demo``, ``hypaware export`` and ``hypaware status`` end to end."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from hypaware.cli import main
from hypaware.cli.demo_cache import DEMO_DATASET


def test_demo_then_export_finds_nothing_new(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "demo"
    assert main(["demo", "--dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert "seeded" in out and "conversations" in out
    assert str(root / "cache") in out
    assert str(root / "hypaware.json") in out
    assert str(root / "export") in out
    assert f"hypaware query --config {root / 'hypaware.json'} {DEMO_DATASET}" in out
    assert "--sql" in out
    assert "hypaware export --config" in out

    table = ds.dataset(root / "export" / DEMO_DATASET, format="parquet", partitioning="hive")
    exported = table.to_table()
    assert exported.num_rows > 300
    assert len(exported.column("event_id").unique()) == exported.num_rows

    config = json.loads((root / "hypaware.json").read_text())
    assert config["sinks"]["local"]["writer"] == "@hypaware/format-parquet"
    assert config["sinks"]["local"]["destination"] == "@hypaware/local-fs"

    # Not a terminal here: JSON summary.
    assert main(["export", "--config", str(root / "hypaware.json"), "--once"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["ok"] is True
    assert summary["sink_partitions"] == 0 and summary["cache_rows"] == 0

    assert main(["status", "--config", str(root / "hypaware.json")]) == 0
    status = json.loads(capsys.readouterr().out)
    local = status["sinks"]["local"]
    assert local["lag_partitions"] == 0 and local["respool"] == 0
    assert local["rows_exported"] == exported.num_rows
    assert local["last_error"] is None
    assert local["datasets"][DEMO_DATASET]["high_water"] > 0

    # A second demo run reuses the cache: nothing seeded, nothing exported.
    assert main(["demo", "--dir", str(root)]) == 0
    out = capsys.readouterr().out
    assert "nothing new" in out
    assert "0 partitions, 0 rows" in out


def test_export_reports_a_failing_sink_and_status_shows_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "demo"
    assert main(["demo", "--dir", str(root)]) == 0
    capsys.readouterr()
    config = json.loads((root / "hypaware.json").read_text())
    # A second sink whose root is a file: its store cannot be built.
    (root / "blocked").write_text("not a directory")
    config["sinks"]["broken"] = {
        "writer": "@hypaware/format-parquet",
        "destination": "@hypaware/local-fs",
        "config": {"root": "blocked"},
    }
    (root / "hypaware.json").write_text(json.dumps(config))
    code = main(["export", "--config", str(root / "hypaware.json"), "--once", "--backfill"])
    assert code == 1
    summary = json.loads(capsys.readouterr().out)
    assert summary["sinks"]["local"]["errors"] == []
    assert "broken" in summary["sinks"]["broken"]["errors"][0]
    assert main(["status", "--config", str(root / "hypaware.json")]) == 0
    status = json.loads(capsys.readouterr().out)
    assert "broken" in status["sinks"]["broken"]["last_error"]


def test_export_bad_config_and_unknown_sink(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["export", "--config", str(tmp_path / "missing.json"), "--once"]) == 2
    assert "does not exist" in capsys.readouterr().err
    root = tmp_path / "demo"
    assert main(["demo", "--dir", str(root)]) == 0
    capsys.readouterr()
    code = main(["export", "--config", str(root / "hypaware.json"), "--once", "--sink", "lokal"])
    assert code == 2
    assert "no such sink 'lokal' (did you mean 'local'?)" in capsys.readouterr().err


@pytest.mark.skipif(shutil.which("hypaware") is None, reason="the hypaware script is not installed")
def test_readme_command_runs_the_installed_script(tmp_path: Path) -> None:
    done = subprocess.run(
        ["hypaware", "demo"], cwd=tmp_path, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert "hypaware demo" in done.stdout
    assert (tmp_path / "hypaware-demo" / "hypaware.json").exists()
    again = subprocess.run(
        [
            sys.executable,
            "-m",
            "hypaware",
            "export",
            "--config",
            "hypaware-demo/hypaware.json",
            "--once",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["cache_partitions"] == 0


def test_the_program_exits_with_the_commands_status_and_skips_only_the_last_collection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import hypaware.cli as cli

    happened: list[str] = []

    def command() -> int:
        happened.append("command")
        return 3

    monkeypatch.setattr(cli, "main", command)
    monkeypatch.setattr(cli.gc, "freeze", lambda: happened.append("frozen"))
    with pytest.raises(SystemExit) as stopped:
        cli.run()
    assert stopped.value.code == 3
    assert happened == ["command", "frozen"]  # never before the command has closed its work


def test_progress_display_redraws_one_line() -> None:
    import io

    from hypaware.cli.export import ProgressDisplay, format_bytes

    stream = io.StringIO()
    display = ProgressDisplay(stream, ["archive", "feed"], live=True)
    display.batch_exported(
        "archive", "events", batch_id="b", partitions=2, rows=1500, bytes=4096, files=2, seconds=1
    )
    display.partitions_retried("feed", "events", ["p1"], ["503"])
    display.finish()
    text = stream.getvalue()
    assert text.count("\r") == 2 and text.endswith("\n")
    assert "archive: 2 partitions, 1,500 rows, 4.0 KiB, 0 retries | feed: 0 partitions" in text
    assert "1 retries" in text
    assert format_bytes(10) == "10 B" and format_bytes(3 * 1024**3) == "3.0 GiB"
    quiet = io.StringIO()
    ProgressDisplay(quiet, ["a"], live=False).redraw()
    assert quiet.getvalue() == ""


def test_export_daemon_stops_on_sigint(tmp_path: Path) -> None:
    import signal
    import time

    root = tmp_path / "demo"
    assert main(["demo", "--dir", str(root)]) == 0
    proc = subprocess.Popen(
        [sys.executable, "-m", "hypaware", "export", "-v", "--config", str(root / "hypaware.json")],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line or "sink local: schedule '*/5 * * * *' (UTC), next pass at" in line:
            break
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert json.loads(out)["ok"] is True


def test_export_with_a_corrupt_state_database(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "demo"
    assert main(["demo", "--dir", str(root)]) == 0
    capsys.readouterr()
    state = root / "state" / "progress.sqlite"
    for suffix in ("-wal", "-shm"):
        Path(f"{state}{suffix}").unlink(missing_ok=True)
    state.write_bytes(b"\x00garbage" * 512)
    code = main(["export", "--config", str(root / "hypaware.json"), "--once"])
    assert code == 2
    err = capsys.readouterr().err
    assert "progress.sqlite is corrupt" in err and "left untouched" in err
    assert state.read_bytes() == b"\x00garbage" * 512
    assert main(["status", "--config", str(root / "hypaware.json")]) == 2
    assert "is corrupt" in capsys.readouterr().err
