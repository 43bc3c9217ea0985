"""Failure summaries: every failed partition counted once, under its own reason."""

from __future__ import annotations

from collections import Counter

from hypothesis import given
from hypothesis import strategies as st

from hypaware.core.types import RetryPartition
from hypaware.export.reports import FIRST_IDS, SinkReport, short_reason, summarise

REASONS = st.sampled_from(["503", "401 rejected", "sink 'a': disk full", "timed out"])


@given(
    st.lists(st.tuples(REASONS, st.booleans()), max_size=40).map(
        lambda xs: [RetryPartition(f"p{i}", r, ok) for i, (r, ok) in enumerate(xs)]
    )
)
def test_summaries_count_every_partition_once_by_reason(retry: list[RetryPartition]) -> None:
    failures = summarise("events", retry)
    assert sum(f.partitions for f in failures) == len(retry)
    keys = [(f.reason, f.retryable) for f in failures]
    assert len(keys) == len(set(keys))
    counted = Counter({(f.reason, f.retryable): f.partitions for f in failures})
    assert counted == Counter((r.reason, r.retryable) for r in retry)
    for f in failures:
        mine = [r.partition_id for r in retry if (r.reason, r.retryable) == (f.reason, f.retryable)]
        assert f.first_ids == mine[:FIRST_IDS]
        line = f.describe()
        assert f"{f.partitions} partitions failed" in line and f.reason in line
        if f.partitions > FIRST_IDS:
            assert f"and {f.partitions - FIRST_IDS} more" in line
    report = SinkReport("a")
    report.add_failures(failures)
    assert report.ok == (not retry)
    assert len(report.errors) == len(failures)


def test_short_reason_drops_what_the_log_prefix_says() -> None:
    assert short_reason("sink 'a': dataset 'events': table t: bad", "a", "events") == "table t: bad"
    assert short_reason("sink 'a' (s3://b): 404", "a", "events") == "s3://b: 404"
    assert short_reason("sink 'ab': x", "a", "events") == "sink 'ab': x"
    assert short_reason("503", "a", "events") == "503"
