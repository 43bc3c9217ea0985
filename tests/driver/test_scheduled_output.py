"""``hypaware export`` in scheduled mode says what it does, on a terminal and piped."""

from __future__ import annotations

import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from .helpers import make_cache

START = "sink fresh: schedule '0 0 1 1 *' (UTC), next pass at "
NOTICE = "sink fresh: dataset events starts after seq "


def _config(tmp_path: Path) -> tuple[Path, int]:
    cache = make_cache(tmp_path / "cache", count=60)
    parts = len(cache.ready_partitions("events"))
    path = tmp_path / "hypaware.json"
    path.write_text(
        json.dumps(
            {
                "state_dir": "state",
                "cache": {"path": "cache"},
                "sinks": {
                    "fresh": {
                        "writer": "@hypaware/format-parquet",
                        "destination": "@hypaware/local-fs",
                        # Once a year: the test never waits for a pass.
                        "config": {"root": "out", "schedule": "0 0 1 1 *"},
                    }
                },
            }
        )
    )
    return path, parts


def _command(config: Path) -> list[str]:
    return [sys.executable, "-m", "hypaware", "export", "--config", str(config)]


def test_piped_prints_the_start_line_and_the_first_pass_notice(tmp_path: Path) -> None:
    config, parts = _config(tmp_path)
    proc = subprocess.Popen(
        _command(config), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert proc.stderr is not None
    seen: list[str] = []
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not any(NOTICE in line for line in seen):
        line = proc.stderr.readline()
        if not line:
            break
        seen.append(line)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    text = "".join(seen) + err
    assert START in text
    assert (
        f"{NOTICE}{parts}: {parts} sealed partitions (60 rows) before it are not exported; "
        "run with --backfill" in text
    )
    assert proc.returncode == 0, text
    assert json.loads(out)["ok"] is True


def test_on_a_terminal_the_lines_do_not_land_inside_the_live_line(tmp_path: Path) -> None:
    config, parts = _config(tmp_path)
    leader, follower = pty.openpty()
    proc = subprocess.Popen(_command(config), stdout=follower, stderr=follower, close_fds=True)
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline and NOTICE.encode() not in b"".join(chunks):
            ready, _, _ = select.select([leader], [], [], 1.0)
            if ready:
                try:
                    chunks.append(os.read(leader, 4096))
                except OSError:
                    break
        proc.send_signal(signal.SIGINT)
        # Drain until the process ends (a pty reader gets EIO after the writer goes).
        end = time.monotonic() + 30
        while time.monotonic() < end:
            ready, _, _ = select.select([leader], [], [], 0.5)
            if ready:
                try:
                    data = os.read(leader, 4096)
                except OSError:
                    break
                if not data:
                    break
                chunks.append(data)
            elif proc.poll() is not None:
                break
        assert proc.wait(timeout=30) == 0
    finally:
        os.close(leader)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    text = b"".join(chunks).decode()
    assert START in text
    assert f"{NOTICE}{parts}: {parts} sealed partitions" in text
    # Each message starts its own line: never appended to a half-drawn live line.
    for line in text.replace("\r\n", "\n").split("\n"):
        if START in line or NOTICE in line:
            visible = line.rsplit("\r", 1)[-1]
            assert visible.startswith(("sink fresh", "20")) or "WARNING" in visible, line
    assert "SINK" in text  # the table at the end, on a terminal
