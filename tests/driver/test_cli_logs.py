"""``--log-format`` / ``--log-level`` on every command, and logs kept out of the live line."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest

from hypaware.cli import main, make_parser
from hypaware.cli.export import ProgressDisplay
from hypaware.cli.logs import JsonFormatter, LineAwareHandler

from .helpers import make_cache


def test_every_command_takes_the_logging_options() -> None:
    parser = make_parser()
    sub = next(a for a in parser._actions if a.dest == "command")
    assert sub.choices is not None
    for name, command in sub.choices.items():
        options = {o for a in command._actions for o in a.option_strings}
        assert {"--log-format", "--log-level"} <= options, name


def test_json_records_carry_the_extra_fields() -> None:
    record = logging.LogRecord(
        "hypaware.export.driver", logging.WARNING, __file__, 1, "sink %s: %d rows", ("a", 3), None
    )
    record.sink = "a"
    record.rows = 3
    record.batch_id = "b-1"
    doc = json.loads(JsonFormatter().format(record))
    assert doc["message"] == "sink a: 3 rows"
    assert doc["level"] == "WARNING" and doc["logger"] == "hypaware.export.driver"
    assert (doc["sink"], doc["rows"], doc["batch_id"]) == ("a", 3, "b-1")
    assert "args" not in doc and "msg" not in doc


def test_a_log_record_clears_the_live_line_and_redraws_it() -> None:
    stream = io.StringIO()
    display = ProgressDisplay(stream, ["archive"], live=True)
    handler = LineAwareHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(message)s"))
    handler.line = display
    display.redraw()
    drawn = stream.getvalue()
    assert drawn.startswith("\rarchive: 0 partitions")
    logger = logging.getLogger("tests.cli_logs")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("something to say")
    finally:
        logger.removeHandler(handler)
        logger.propagate = True
    after = stream.getvalue()[len(drawn) :]
    width = len(drawn) - 1
    # Cleared (overwritten with spaces, cursor back at the start), the record, the line again.
    assert after.startswith("\r" + " " * width + "\r" + "WARNING something to say\n")
    assert after.endswith("\rarchive: 0 partitions, 0 rows, 0 B, 0 retries")


def test_json_logs_from_the_command_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_cache(tmp_path / "cache", count=30)
    config = tmp_path / "hypaware.json"
    config.write_text(
        json.dumps(
            {
                "state_dir": "state",
                "cache": {"path": "cache"},
                "sinks": {
                    "files": {
                        "writer": "@hypaware/format-parquet",
                        "destination": "@hypaware/local-fs",
                        "config": {"root": "out"},
                    }
                },
            }
        )
    )
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    args = ["--config", str(config), "--once", "--log-format", "json", "--log-level", "info"]
    assert main(["export", *args]) == 0
    err = capsys.readouterr().err
    records = [json.loads(line) for line in err.splitlines()]
    batches = [r for r in records if "batch_id" in r and r["logger"] == "hypaware.export.driver"]
    assert records and all(r["level"] in ("INFO", "WARNING") for r in records)
    # Without --backfill: the start point says what it leaves out.
    notice = next(r for r in records if "before it are not exported" in r["message"])
    assert notice["sink"] == "files" and notice["before_start_partitions"] > 0
    assert batches == []  # nothing to send after a fresh start
    # Nothing left behind on the root logger.
    assert root.handlers == handlers and root.level == level


def test_scheduled_and_piped_one_line_per_pass_naming_its_failure() -> None:
    from datetime import UTC, datetime

    from hypaware.core.types import RetryPartition
    from hypaware.export.reports import SinkReport, summarise

    stream = io.StringIO()
    display = ProgressDisplay(stream, ["fwd"], live=False, scheduled=True)
    display.sink_scheduled("fwd", "*/5 * * * *", datetime(2026, 6, 1, 0, 5, tzinfo=UTC))
    report = SinkReport("fwd", partitions=2, rows=20, parked=3)
    report.add_failures(
        summarise("events", [RetryPartition(f"p{i}", "401", retryable=False) for i in range(3)])
    )
    display.pass_finished("fwd", report)
    display.pass_finished("fwd", SinkReport("fwd", partitions=1, rows=5))
    lines = stream.getvalue().splitlines()
    assert lines[0] == "sink fwd: schedule '*/5 * * * *' (UTC), next pass at 2026-06-01T00:05:00Z"
    assert lines[1].startswith("sink fwd: pass done: 2 partitions, 20 rows")
    assert "3 failed, 3 parked" in lines[1] and "401" in lines[1]
    assert lines[2] == "sink fwd: pass done: 1 partitions, 5 rows, 0 B"
    assert "\r" not in stream.getvalue()
    assert display.counters["fwd"].passes == 2
