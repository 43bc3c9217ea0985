"""Every failure reaches the report, ``export --json``, ``status --json`` and the exit code,
with one WARNING per batch and reason (never one per partition). Real peers only."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from hypaware.cache.local import LocalCache
from hypaware.cli import main
from hypaware.core.types import DatasetInfo
from hypaware.testing.servers.central import CentralServer
from hypaware.testing.servers.peers import S3Peer

from .helpers import make_cache, rows

WRITER = "@hypaware/format-parquet"


def write_config(tmp_path: Path, sinks: dict[str, Any]) -> Path:
    path = tmp_path / "hypaware.json"
    doc = {"state_dir": "state", "cache": {"path": "cache"}, "sinks": sinks}
    path.write_text(json.dumps(doc))
    return path


def export_and_status(
    config: Path, capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[str, Any], list[dict[str, Any]], dict[str, Any]]:
    args = ["--config", str(config), "--once", "--backfill", "--json", "--log-format", "json"]
    code = main(["export", *args])
    out, err = capsys.readouterr()
    records = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    summary = json.loads(out)
    assert main(["status", "--config", str(config), "--json"]) == 0
    status = json.loads(capsys.readouterr().out)
    return code, summary, records, status


def assert_visible(
    code: int,
    summary: dict[str, Any],
    records: list[dict[str, Any]],
    status: dict[str, Any],
    sink: str,
    cause: str,
) -> None:
    assert code == 1
    assert summary["ok"] is False
    report = summary["sinks"][sink]
    assert report["ok"] is False
    assert report["errors"], report
    assert any(cause in e for e in report["errors"]), report["errors"]
    assert any(cause in e for e in summary["errors"])
    state = status["sinks"][sink]
    assert state["last_error"] is not None and cause in state["last_error"]
    assert state["last_success"] is None
    assert state["failing"] is True and state["error_since"] is not None
    warnings = [r for r in records if r["level"] == "WARNING"]
    failed = sum(f["partitions"] for f in report["failures"])
    batches = report["batches"]
    # One line per batch and reason, not per partition.
    reasons = max(1, len(report["failures"]))
    assert len(warnings) <= batches * reasons, warnings
    if failed:
        assert failed > len(warnings)
        assert all(w["sink"] == sink and "batch_id" in w for w in warnings)
        assert state["error_partitions"] == failed


@pytest.fixture
def cache_dir(tmp_path: Path) -> Path:
    cache = make_cache(tmp_path / "cache", count=60)
    assert len(cache.ready_partitions("events")) > 3
    return tmp_path / "cache"


def test_local_root_that_cannot_be_written(
    tmp_path: Path,
    cache_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The dataset's directory under the root is a file: every write under it fails.
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "events").write_text("in the way")
    config = write_config(
        tmp_path,
        {
            "files": {
                "writer": WRITER,
                "destination": "@hypaware/local-fs",
                "config": {"root": "out"},
            }
        },
    )
    code, summary, records, status = export_and_status(config, capsys)
    assert_visible(code, summary, records, status, "files", "Not a directory")
    # The destination's fault, not the rows': the sink halts, nothing is parked.
    parts = LocalCache(cache_dir, fsync=False).ready_partitions("events")
    assert_halted(summary, status, "files", "Not a directory")
    # The table view, as on a terminal: the failure, since when, and the halt.
    monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
    assert main(["status", "--config", str(config)]) == 0
    text = capsys.readouterr().out
    assert "error: files since 20" in text and "halted: files since 20" in text
    # Once the cause is gone, the next pass sends every row without `retry`.
    (tmp_path / "out" / "events").unlink()
    code, summary, _records, status = export_and_status(config, capsys)
    assert code == 0 and summary["ok"] is True, summary["errors"]
    assert summary["sinks"]["files"]["partitions"] == len(parts)
    assert status["sinks"]["files"]["halted"] is None
    assert status["sinks"]["files"]["lag_rows"] == 0


def assert_halted(summary: dict[str, Any], status: dict[str, Any], sink: str, cause: str) -> None:
    report = summary["sinks"][sink]
    assert report["parked"] == 0 and report["parked_total"] == 0
    assert report["halted"] is not None and cause in report["halted"]["reason"]
    state = status["sinks"][sink]
    assert state["parked"] == 0
    assert state["halted"] is not None and cause in state["halted"]["reason"]
    assert state["halted"]["attempts"] == 1


@pytest.mark.s3
def test_moto_bucket_that_does_not_exist(
    tmp_path: Path, cache_dir: Path, moto_s3: S3Peer, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(
        tmp_path,
        {
            "archive": {
                "writer": WRITER,
                "destination": "@hypaware/s3",
                "config": {
                    "bucket": "no-such-bucket-here",
                    "endpoint": moto_s3.endpoint,
                    "region": moto_s3.region,
                    "allow_http": True,
                    "access_key_id": moto_s3.access_key_id,
                    "secret_access_key": moto_s3.secret_access_key,
                    "max_retries": 1,
                    "retry_timeout": 5.0,
                },
            }
        },
    )
    code, summary, records, status = export_and_status(config, capsys)
    assert_visible(code, summary, records, status, "archive", "no-such-bucket-here")
    assert moto_s3.secret_access_key not in json.dumps([summary, records, status])
    assert_halted(summary, status, "archive", "does not exist")
    # The bucket is created: the next pass sends every row without `retry`.
    moto_s3.create_bucket("no-such-bucket-here")
    code, summary, _records, status = export_and_status(config, capsys)
    assert code == 0 and summary["ok"] is True, summary["errors"]
    assert status["sinks"]["archive"]["halted"] is None
    assert status["sinks"]["archive"]["lag_rows"] == 0


def test_central_server_answering_401(
    tmp_path: Path,
    cache_dir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("HYP_TEST_TOKEN", "the-wrong-token-0000")
    with CentralServer(token="the-right-token-1111") as central:
        config = write_config(
            tmp_path,
            {
                "fwd": {
                    "plugin": "@hypaware/central",
                    "config": {"endpoint": central.url, "token": "${HYP_TEST_TOKEN}"},
                }
            },
        )
        code, summary, records, status = export_and_status(config, capsys)
        assert_visible(code, summary, records, status, "fwd", "401")
        assert "the-wrong-token-0000" not in json.dumps([summary, records, status])
        # A wrong token is the sink's fault: halted, nothing parked, one request sent.
        assert_halted(summary, status, "fwd", "401")
        assert central.rows("events") == []
        # The token is fixed: the next pass sends every row, no `retry` needed.
        monkeypatch.setenv("HYP_TEST_TOKEN", "the-right-token-1111")
        code, summary, _records, status = export_and_status(config, capsys)
        assert code == 0 and summary["ok"] is True, summary["errors"]
        assert status["sinks"]["fwd"]["halted"] is None
        assert status["sinks"]["fwd"]["lag_rows"] == 0
        sent = LocalCache(cache_dir, fsync=False).ready_partitions("events")
        assert len(central.rows("events")) == sum(p.row_count for p in sent)


@pytest.mark.iceberg
def test_iceberg_table_with_an_incompatible_column(
    tmp_path: Path, cache_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    sinks = {
        "lake": {
            "writer": "@hypaware/format-iceberg",
            "destination": "@hypaware/local-fs",
            # The catalog outside the state directory: the second run has new state.
            "config": {
                "root": "warehouse",
                "namespace": "hyp",
                "catalog": {"type": "sqlite", "path": "catalog.sqlite"},
            },
        }
    }
    config = write_config(tmp_path, sinks)
    # A first export makes the table with `n` as a long.
    assert main(["export", "--config", str(config), "--once", "--backfill", "--json"]) == 0
    capsys.readouterr()
    # The same dataset name, with `n` now a string, in a new cache.
    schema = pa.schema(
        [
            pa.field("row_id", pa.string(), nullable=False),
            pa.field("conv", pa.string()),
            pa.field("ts", pa.timestamp("us", tz="UTC")),
            pa.field("n", pa.string()),
        ]
    )
    other = LocalCache(tmp_path / "cache2", fsync=False)
    other.define_dataset(
        DatasetInfo(
            name="events",
            schema=schema,
            time_column="ts",
            lookup_key="conv",
            partition_by=("conv",),
            time_grain="hour",
        )
    )
    other.append("events", [dict(r, n=str(r["n"])) for r in rows(1000, 60)])
    other.seal()
    doc = json.loads(config.read_text())
    doc["cache"]["path"] = "cache2"
    doc["state_dir"] = "state2"
    config.write_text(json.dumps(doc))
    code, summary, records, status = export_and_status(config, capsys)
    assert_visible(code, summary, records, status, "lake", "'n'")
    assert status["sinks"]["lake"]["parked"] == len(other.ready_partitions("events"))
