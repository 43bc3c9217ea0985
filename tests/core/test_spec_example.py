"""The spec's example config, checked against the installed first-party plugins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hypaware import ConfigError, Registry, resolve
from hypaware.cli import main

from .fakes import SPEC_EXAMPLE


def test_spec_example_resolves_with_installed_plugins() -> None:
    archive, forward = resolve(SPEC_EXAMPLE, Registry.from_entry_points())
    assert archive.describe() == (
        "@hypaware/format-iceberg on @hypaware/s3 (encoder @hypaware/format-parquet)"
    )
    assert archive.queryable
    assert forward.describe() == "@hypaware/central"


def test_check_config_accepts_the_spec_example(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "hypaware.json"
    path.write_text(json.dumps(SPEC_EXAMPLE, indent=2))
    assert main(["check-config", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("archive: blob sink, @hypaware/format-iceberg on @hypaware/s3")
    assert lines[0].endswith(", queryable")
    assert lines[1].startswith("forward: request sink, @hypaware/central, schedule '*/5 * * * *'")


def test_check_config_rejects_parquet_on_webhook(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = {
        "sinks": {
            "bad": {
                "writer": "@hypaware/format-parquet",
                "destination": "@hypaware/webhook",
                "config": {"url": "https://hooks.example"},
            }
        }
    }
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    assert main(["check-config", str(path)]) == 2
    err = capsys.readouterr().err
    assert "writer @hypaware/format-parquet requires hypaware.blob-store" in err
    assert "destination @hypaware/webhook provides hypaware.http-endpoint" in err
    with pytest.raises(ConfigError):
        resolve(doc, Registry.from_entry_points())


# The least config each destination needs.
DESTINATION_KEYS = {
    "@hypaware/local-fs": {"root": "export"},
    "@hypaware/memory": {},
    "@hypaware/s3": {"bucket": "archive"},
    "@hypaware/gcs": {"bucket": "archive"},
    "@hypaware/azure": {"account": "acme", "container": "archive"},
}


@pytest.mark.parametrize("destination", sorted(DESTINATION_KEYS))
@pytest.mark.parametrize(
    ("writer", "queryable"),
    [("@hypaware/format-parquet", True), ("@hypaware/format-jsonl", False)],
)
def test_first_party_pairs_and_queryability(writer: str, destination: str, queryable: bool) -> None:
    doc = {
        "sinks": {
            "s": {
                "writer": writer,
                "destination": destination,
                "config": DESTINATION_KEYS[destination],
            }
        }
    }
    (plan,) = resolve(doc, Registry.from_entry_points())
    assert plan.queryable is queryable
