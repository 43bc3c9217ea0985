"""Lost or replaced state is refused, not absorbed; --backfill and reset-progress recover."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads
import pytest

from hypaware.cache.local import LocalCache
from hypaware.cli import main

from .helpers import all_row_ids, make_cache, rows


def write_config(tmp_path: Path, root: str = "out", name: str = "files") -> Path:
    path = tmp_path / "hypaware.json"
    sink = {"writer": "@hypaware/format-parquet", "destination": "@hypaware/local-fs"}
    doc = {
        "state_dir": "state",
        "cache": {"path": "cache"},
        "sinks": {name: {**sink, "config": {"root": root}}},
    }
    path.write_text(json.dumps(doc))
    return path


def exported_ids(root: Path) -> Counter[str]:
    if not root.exists():
        return Counter()
    files = sorted(str(p) for p in root.rglob("*.parquet"))
    if not files:
        return Counter()
    table = pads.dataset(files, format="parquet").to_table(columns=["row_id"])
    return Counter(table.column("row_id").to_pylist())


def export(config: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, Any]:
    code = main(["export", "--config", str(config), "--once", "--json", *extra])
    out = capsys.readouterr().out
    return code, json.loads(out)


def seed_and_export(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> tuple[Path, LocalCache]:
    cache = make_cache(tmp_path / "cache", count=60, retention=None)
    config = write_config(tmp_path)
    code, summary = export(config, capsys, "--backfill")
    assert code == 0 and summary["cache_rows"] == 60
    # Sealed after the export: not yet at the sink.
    cache.append("events", rows(60, 40))
    cache.seal()
    return config, cache


def lose(state: Path, how: str) -> None:
    store = state / "progress.sqlite"
    for suffix in ("-wal", "-shm"):
        Path(f"{store}{suffix}").unlink(missing_ok=True)
    if how == "truncated":
        store.write_bytes(b"")
    else:
        store.unlink()


@pytest.mark.parametrize("how", ["truncated", "deleted"])
def test_lost_progress_is_refused_then_backfilled_exactly_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], how: str
) -> None:
    config, cache = seed_and_export(tmp_path, capsys)
    before = exported_ids(tmp_path / "out")
    sealed = all_row_ids(cache)
    lose(tmp_path / "state", how)
    if how == "truncated":
        # An empty file is not a store: status says so instead of "lag 0".
        assert main(["status", "--config", str(config)]) == 2
        assert "empty (0 bytes)" in capsys.readouterr().err
    else:
        assert main(["status", "--config", str(config), "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert "missing" in doc["sinks"]["files"]["warnings"][0]

    for _ in range(2):  # refused again: the refusal itself does not make it "fresh"
        code, summary = export(config, capsys)
        assert code == 1 and summary["ok"] is False
        (error,) = summary["sinks"]["files"]["errors"]
        assert "progress was lost" in error and "progress.sqlite" in error
        assert "--backfill" in error and "reset-progress" in error
        assert exported_ids(tmp_path / "out") == before  # nothing exported
        assert all_row_ids(cache) == sealed  # nothing lost

    code, summary = export(config, capsys, "--backfill")
    assert code == 0, summary
    got = exported_ids(tmp_path / "out")
    assert set(got) == sealed
    assert max(got.values()) == 1  # what was already there is not sent again
    # From now on a plain export is fine.
    code, summary = export(config, capsys)
    assert code == 0 and summary["cache_rows"] == 0


def test_reset_progress_answers_a_lost_store(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, cache = seed_and_export(tmp_path, capsys)
    lose(tmp_path / "state", "deleted")
    assert (
        main(["reset-progress", "--config", str(config), "--sink", "files", "--from", "now"]) == 2
    )
    assert "--yes" in capsys.readouterr().err
    args = ["--config", str(config), "--sink", "files", "--from", "now", "--yes"]
    assert main(["reset-progress", *args]) == 0
    assert "progress reset from now" in capsys.readouterr().out
    code, summary = export(config, capsys)
    assert code == 0 and summary["cache_rows"] == 0
    assert len(all_row_ids(cache)) == 100  # the cache is untouched


def test_changed_root_is_refused_then_backfilled_to_the_new_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, cache = seed_and_export(tmp_path, capsys)
    config = write_config(tmp_path, root="elsewhere")
    code, summary = export(config, capsys)
    assert code == 1
    (error,) = summary["sinks"]["files"]["errors"]
    assert "destination changed" in error
    assert "root: 'out' -> 'elsewhere'" in error
    assert "--backfill" in error and "reset-progress" in error
    assert not (tmp_path / "elsewhere").exists()

    assert main(["status", "--config", str(config), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert "destination of sink 'files' changed" in doc["sinks"]["files"]["warnings"][0]
    assert main(["check-config", "--config", str(config), "--state", "--json"]) == 0
    captured = capsys.readouterr()
    assert "destination of sink 'files' changed" in json.loads(captured.out)["warnings"][0]
    assert "check-config: warning: destination of sink 'files' changed" in captured.err

    code, summary = export(config, capsys, "--backfill")
    assert code == 0, summary
    got = exported_ids(tmp_path / "elsewhere")
    assert set(got) == all_row_ids(cache) and max(got.values()) == 1
    code, summary = export(config, capsys)
    assert code == 0 and summary["cache_rows"] == 0


def test_changed_bucket_prefix_is_a_changed_destination(tmp_path: Path) -> None:
    from hypaware.core.config import SinkSpec
    from hypaware.export.identity import changes, fingerprint

    a = SinkSpec(
        name="s3",
        writer="@hypaware/format-parquet",
        destination="@hypaware/s3",
        config={"bucket": "a", "prefix": "p", "secret_access_key": "hunter2"},
    )
    b = SinkSpec(
        name="s3",
        writer=a.writer,
        destination=a.destination,
        config={"bucket": "b", "prefix": "p", "secret_access_key": "other"},
    )
    c = SinkSpec(
        name="s3",
        writer=a.writer,
        destination=a.destination,
        config={"bucket": "a", "prefix": "p", "secret_access_key": "rotated"},
    )
    assert fingerprint(a)[0] != fingerprint(b)[0]
    assert fingerprint(a) == fingerprint(c)  # a rotated secret is the same place
    assert "hunter2" not in fingerprint(a)[1]
    assert changes(fingerprint(a)[1], fingerprint(b)[1]) == "bucket: 'a' -> 'b'"


def test_retry_and_reset_progress_bad_input(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config, _cache = seed_and_export(tmp_path, capsys)
    assert main(["retry", "--config", str(config), "--sink", "fils"]) == 2
    assert "no such sink 'fils' (did you mean 'files'?)" in capsys.readouterr().err
    assert main(["retry", "--config", str(config), "--dataset", "event"]) == 2
    assert "(did you mean 'events'?)" in capsys.readouterr().err
    assert main(["retry", "--config", str(config)]) == 2
    assert "--all" in capsys.readouterr().err
    args = ["--config", str(config), "--sink", "fils", "--from", "start", "--yes"]
    assert main(["reset-progress", *args]) == 2
    assert "(did you mean 'files'?)" in capsys.readouterr().err
    assert main(["retry", "--config", str(config), "--all"]) == 0
    assert json.loads(capsys.readouterr().out)["retried"] == 0


def test_retry_and_reset_progress_take_the_shape_of_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = make_cache(tmp_path / "cache", count=30, retention=None)
    path = tmp_path / "hypaware.json"
    sink = {"writer": "@hypaware/format-parquet", "destination": "@hypaware/local-fs"}
    doc = {
        "state_dir": "state",
        "cache": {"path": "cache"},
        "sinks": {name: {**sink, "config": {"root": name}} for name in ("a", "b", "c")},
    }
    path.write_text(json.dumps(doc))
    assert export(path, capsys, "--backfill")[0] == 0
    # The config from $HYPAWARE_CONFIG, as for every other command.
    monkeypatch.setenv("HYPAWARE_CONFIG", str(path))
    # Every --sink counts, and a misspelt one stops the lot before anything is reset.
    assert main(["reset-progress", "--sink", "a", "--sink", "x", "--from", "start", "--yes"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("hypaware reset-progress: error: no such sink 'x'"), err
    assert main(["reset-progress", "--sink", "a", "--sink", "b", "--from", "start", "--yes"]) == 0
    out = capsys.readouterr().out
    assert "sink a: progress reset" in out and "sink b: progress reset" in out
    code, report = export(path, capsys)
    assert code == 0
    assert report["sinks"]["a"]["rows"] == 30 and report["sinks"]["b"]["rows"] == 30
    assert report["sinks"]["c"]["rows"] == 0
    assert exported_ids(tmp_path / "c") == Counter(all_row_ids(cache))
    assert main(["retry", "--sink", "a", "--sink", "nope"]) == 2
    assert capsys.readouterr().err.startswith("hypaware retry: error: no such sink 'nope'")
    assert main(["retry", "--sink", "a", "--sink", "b"]) == 0
    assert json.loads(capsys.readouterr().out)["retried"] == 0
    monkeypatch.delenv("HYPAWARE_CONFIG")
    assert main(["retry", "--all"]) == 2
    assert "hypaware retry: error: no config: give --config FILE" in capsys.readouterr().err


def test_piped_export_json_gives_seconds_in_milliseconds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_cache(tmp_path / "cache", count=10, retention=None)
    code, report = export(write_config(tmp_path), capsys, "--backfill")
    assert code == 0
    seconds = report["sinks"]["files"]["seconds"]
    assert seconds > 0 and seconds == round(seconds, 3)


def test_the_summary_counts_sink_rows_and_distinct_cache_rows_apart(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    make_cache(tmp_path / "cache", count=30, retention=None)
    path = tmp_path / "hypaware.json"
    sink = {"writer": "@hypaware/format-parquet", "destination": "@hypaware/local-fs"}
    doc = {
        "state_dir": "state",
        "cache": {"path": "cache"},
        "sinks": {name: {**sink, "config": {"root": name}} for name in ("a", "b")},
    }
    path.write_text(json.dumps(doc))
    code, report = export(path, capsys, "--backfill")
    assert code == 0
    per_sink = [report["sinks"][n] for n in ("a", "b")]
    assert [r["rows"] for r in per_sink] == [30, 30]
    # Two sinks took the same 30 cache rows: 60 sent, 30 distinct.
    assert (report["sink_rows"], report["cache_rows"]) == (60, 30)
    parts = per_sink[0]["partitions"]
    assert parts > 0 and report["sink_partitions"] == 2 * parts
    assert report["cache_partitions"] == parts
    assert "rows" not in report and "partitions" not in report
    assert all("exported" not in r for r in per_sink)
    # Only one sink resent: both counters agree.
    assert (
        main(["reset-progress", "--config", str(path), "--sink", "a", "--from", "start", "--yes"])
        == 0
    )
    capsys.readouterr()
    code, report = export(path, capsys)
    assert (report["sink_rows"], report["cache_rows"]) == (30, 30)
