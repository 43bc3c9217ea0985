"""The shape every command shares: piped output, closed pipes, one timestamp form."""

from __future__ import annotations

import csv
import io
import json
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from hypaware.cli import main

from .test_cli import _run, _setup


def test_a_piped_table_keeps_every_cell_whole(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _setup(tmp_path)
    monkeypatch.delenv("COLUMNS", raising=False)
    code, out, err = _run(capsys, "--config", cfg, "events")
    assert code == 0, err
    lines = out.splitlines()
    assert "…" not in out
    header = lines[0].split()
    assert header[:2] == ["row_id", "ts"]
    first = lines[2].split()
    assert first[1].endswith("Z") and "T" in first[1]


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_timestamps_print_in_one_iso_utc_form(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    cfg = _setup(tmp_path)
    code, out, err = _run(capsys, "--config", cfg, "events", "--format", fmt, "--limit", "3")
    assert code == 0, err
    if fmt == "jsonl":
        stamps = [json.loads(line)["ts"] for line in out.splitlines()]
    else:
        stamps = [row["ts"] for row in csv.DictReader(io.StringIO(out))]
    assert len(stamps) == 3
    for stamp in stamps:
        assert stamp.endswith("Z") and "+" not in stamp and "T" in stamp, stamp


@pytest.fixture
def closed_stdout(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """stdout as a pipe whose reader has gone: writes raise BrokenPipeError."""
    read, write = os.pipe()
    os.close(read)
    stream = os.fdopen(write, "w", buffering=1)
    monkeypatch.setattr(sys, "stdout", stream)
    try:
        yield
    finally:
        monkeypatch.undo()
        stream.close()


@pytest.mark.usefixtures("closed_stdout")
@pytest.mark.parametrize(
    "argv",
    [["plugins"], ["plugins", "--json"], ["check-config", "--json"], ["query"], ["status"]],
)
def test_a_closed_pipe_ends_every_command_quietly(
    tmp_path: Path, capfd: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    cfg = _setup(tmp_path)
    if argv[0] != "plugins":
        argv = [argv[0], "--config", cfg, *argv[1:], *(["events"] if argv[0] == "query" else [])]
    assert main(argv) == 0
    assert "Traceback" not in capfd.readouterr().err
