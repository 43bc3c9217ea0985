"""The query benchmark at a tiny size, so it keeps working (its timings are not checked)."""

from __future__ import annotations

import pytest

from benchmarks import query_one_key


def test_query_benchmark_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert query_one_key.main(["--rows", "5000", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert "hypaware.query" in out and "ratio" in out
