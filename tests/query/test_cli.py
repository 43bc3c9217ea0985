"""``hypaware query``: every output format, --sql, terminal-width tables and bad input."""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from hypaware.cli import main
from hypaware.testing.servers.peers import free_port

from .helpers import cache_for, config, export, jsonl_sink, make_rows, parquet_sink


def _setup(tmp_path: Path, sinks: dict[str, Any] | None = None) -> str:
    sinks = sinks if sinks is not None else {"arch": parquet_sink(tmp_path / "out")}
    doc = {
        "state_dir": str(tmp_path / "state"),
        "cache": {"path": str(tmp_path / "cache")},
        "sinks": sinks,
    }
    path = tmp_path / "hypaware.json"
    path.write_text(json.dumps(doc))
    cfg = config(tmp_path, sinks)
    cache = cache_for(cfg)
    cache.append("events", make_rows(0, 30, day=0))
    cache.seal("events")
    export(cfg, cache)
    cache.append("events", make_rows(30, 10, day=1))
    cache.seal("events")
    return str(path)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["query", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_table_fits_the_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _setup(tmp_path)
    for width in (120, 40, 20):
        monkeypatch.setenv("COLUMNS", str(width))
        code, out, err = _run(capsys, "--config", cfg, "events")
        assert code == 0, err
        lines = out.splitlines()
        assert lines[-1].startswith("(40 rows)")
        assert all(len(line) <= width for line in lines[:-1]), (width, lines[:3])
        assert lines[0].split()[0] == "row_id"
    monkeypatch.setenv("COLUMNS", "20")
    _code, out, _err = _run(capsys, "--config", cfg, "events")
    assert "not shown" in out.splitlines()[-1]


def test_csv(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _setup(tmp_path)
    code, out, err = _run(
        capsys,
        "--config",
        cfg,
        "events",
        "--format",
        "csv",
        "--columns",
        "row_id,conv",
        "--key",
        "c1",
        "--key",
        "c2",
    )
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out)))
    assert sorted(int(r["row_id"]) for r in rows) == [i for i in range(40) if i % 3 != 0]
    assert set(rows[0]) == {"row_id", "conv"}


def test_jsonl_with_filters(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _setup(tmp_path)
    code, out, err = _run(
        capsys,
        "--config",
        cfg,
        "events",
        "--format",
        "jsonl",
        "--since",
        "2026-03-02",
        "--where",
        "tokens > 2 and role = 'assistant'",
    )
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    expected = [r for r in make_rows(30, 10, day=1) if r["tokens"] > 2 and r["role"] == "assistant"]
    assert sorted(r["row_id"] for r in rows) == [r["row_id"] for r in expected]
    assert rows[0]["ts"].startswith("2026-03-02T")


def test_parquet_to_a_file_and_limit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _setup(tmp_path)
    target = tmp_path / "out.parquet"
    code, _out, err = _run(
        capsys,
        "--config",
        cfg,
        "events",
        "--format",
        "parquet",
        "--output",
        str(target),
        "--limit",
        "7",
    )
    assert code == 0, err
    assert pq.read_table(target).num_rows == 7


def test_output_file_for_text_formats(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _setup(tmp_path)
    target = tmp_path / "rows.jsonl"
    code, out, _err = _run(
        capsys, "--config", cfg, "events", "--format", "jsonl", "--output", str(target)
    )
    assert code == 0 and out == ""
    assert len(target.read_text().splitlines()) == 40


def test_sql_over_the_union(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("duckdb")
    cfg = _setup(tmp_path)
    code, out, err = _run(
        capsys,
        "--config",
        cfg,
        "events",
        "--format",
        "jsonl",
        "--sql",
        "SELECT conv, count(*) AS n, count(DISTINCT row_id) AS d FROM events GROUP BY conv ORDER BY conv",
    )
    assert code == 0, err
    rows = [json.loads(line) for line in out.splitlines()]
    assert rows == [
        {"conv": "c0", "n": 14, "d": 14},
        {"conv": "c1", "n": 13, "d": 13},
        {"conv": "c2", "n": 13, "d": 13},
    ]
    code, _out, err = _run(capsys, "--config", cfg, "events", "--sql", "SELECT nope FROM events")
    assert code == 2 and "--sql" in err and "nope" in err


@pytest.mark.parametrize("fmt", ["csv", "table", "jsonl"])
def test_nested_values_print_as_json_text(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str
) -> None:
    pytest.importorskip("duckdb")
    cfg = _setup(tmp_path)
    sql = (
        "SELECT row_id, [conv, 'x'] AS tags, {'id': row_id, 'c': conv} AS s, "
        "MAP {'k': row_id} AS m, ts FROM events WHERE row_id = 4"
    )
    code, out, err = _run(capsys, "--config", cfg, "events", "--format", fmt, "--sql", sql)
    assert code == 0, err
    if fmt == "csv":
        (row,) = list(csv.DictReader(io.StringIO(out)))
    elif fmt == "jsonl":
        (row,) = [json.loads(line) for line in out.splitlines()]
        row = {k: v if isinstance(v, str) else json.dumps(v) for k, v in row.items()}
    else:
        head, rule, line, _count = out.splitlines()
        # JSON text has spaces; split the row where the rule's dashes start.
        starts = [i for i, ch in enumerate(rule) if ch == "-" and (i == 0 or rule[i - 1] == " ")]
        cells = [line[a:b].strip() for a, b in zip(starts, [*starts[1:], None], strict=True)]
        row = dict(zip(head.split(), cells, strict=True))
    assert json.loads(row["tags"]) == ["c1", "x"]
    assert json.loads(row["s"]) == {"id": 4, "c": "c1"}
    assert json.loads(row["m"]) == {"k": 4}
    assert row["ts"].endswith("Z")


def test_sql_without_duckdb_says_how_to_install(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cfg = _setup(tmp_path)
    monkeypatch.setitem(sys.modules, "duckdb", None)
    code, _out, err = _run(capsys, "--config", cfg, "events", "--sql", "SELECT 1")
    assert code == 2
    assert "pip install 'hypaware[query]'" in err


def test_cache_alone_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = _setup(tmp_path, {"log": jsonl_sink(tmp_path / "log")})
    code, out, err = _run(capsys, "--config", cfg, "events", "--format", "jsonl")
    assert code == 0
    assert len(out.splitlines()) == 40
    assert "warning" in err and "retention" in err


@pytest.mark.parametrize(
    ("argv", "code", "message"),
    [
        (["evnts"], 2, "did you mean 'events'"),
        (["events", "--sink", "log"], 2, "'log' is not queryable"),
        (["events", "--sink", "nope"], 2, "no sink named 'nope'"),
        (["events", "--since", "last tuesday"], 2, "since: 'last tuesday'"),
        (["events", "--where", "missing = 1"], 2, "no column 'missing'"),
        (["events", "--where", "tokens >"], 2, "ends too early"),
        (["events", "--where", "__import__('os')"], 2, "where"),
        (["events", "--columns", "row_id,nope"], 2, "no column 'nope'"),
    ],
)
def test_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], code: int, message: str
) -> None:
    cfg = _setup(
        tmp_path, {"arch": parquet_sink(tmp_path / "out"), "log": jsonl_sink(tmp_path / "l")}
    )
    got, out, err = _run(capsys, "--config", cfg, *argv)
    assert got == code
    assert message in err
    assert out == ""


def test_missing_config_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _out, err = _run(capsys, "--config", str(tmp_path / "none.json"), "events")
    assert code == 2 and "does not exist" in err


def test_unreachable_sink(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    remote = {
        "writer": "@hypaware/format-parquet",
        "destination": "@hypaware/s3",
        "config": {
            "bucket": "gone",
            "endpoint": f"http://127.0.0.1:{free_port()}",
            "allow_http": True,
            "region": "us-east-1",
            "access_key_id": "x",
            "secret_access_key": "y",
            "max_retries": 0,
            "retry_timeout": 1.0,
            "connect_timeout": 1.0,
        },
    }
    cfg = _setup(tmp_path, {"remote": remote})
    code, out, err = _run(capsys, "--config", cfg, "events", "--format", "jsonl")
    assert code == 1 and out == ""
    assert "sink 'remote'" in err
    code, out, err = _run(capsys, "--config", cfg, "events", "--format", "jsonl", "--allow-partial")
    assert code == 0
    assert len(out.splitlines()) == 40
    assert "partial" in err


def test_stopping_early_exits_cleanly(tmp_path: Path) -> None:
    # --limit stops reading mid-scan; the process must still exit cleanly
    # (no reader thread left calling into an interpreter that is shutting down).
    import subprocess

    demo = tmp_path / "demo"
    subprocess.run(
        [sys.executable, "-m", "hypaware", "demo", "--dir", str(demo)],
        check=True,
        capture_output=True,
        timeout=300,
    )
    for _ in range(3):
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "hypaware",
                "query",
                "--config",
                str(demo / "hypaware.json"),
                "conversation_events",
                "--limit",
                "3",
                "--format",
                "csv",
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert proc.returncode == 0, proc.stderr
        assert len(proc.stdout.splitlines()) == 4
