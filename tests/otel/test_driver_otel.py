"""OTelObserver under the real driver: metrics and spans of an export with one failing partition."""

from __future__ import annotations

from pathlib import Path

from opentelemetry.trace import SpanKind, StatusCode

from hypaware.export.driver import ExportDriver
from hypaware.export.observer import CountingObserver
from tests.driver.helpers import ScriptedSink, make_cache, sinks

from .helpers import Telemetry

S = "hypaware.sink"
D = "hypaware.dataset"


async def test_one_failing_partition_in_metrics_and_spans(tmp_path: Path, otel: Telemetry) -> None:
    cache = make_cache(tmp_path / "cache", count=30)
    parts = cache.ready_partitions("events")
    bad = parts[2]
    sink = ScriptedSink()
    sink.mode = "partial"
    sink.fail_ids = lambda pid: pid == bad.id
    counting = CountingObserver()
    driver = ExportDriver(
        cache,
        sinks(("arch", sink), max_batch_rows=8),
        state=tmp_path / "state",
        observer=[otel.observer, counting],
    )
    try:
        report = await driver.run_once(backfill=True)
    finally:
        await driver.close()

    batches = len(sink.batches)
    assert batches > 1
    attrs = {S: "arch", D: "events"}
    assert otel.total("hypaware.export.batches", **attrs) == batches
    assert otel.total("hypaware.export.partitions", **attrs) == len(parts) - 1
    assert otel.total("hypaware.export.rows", **attrs) == 30 - bad.row_count
    assert otel.total("hypaware.export.partitions.retried", **attrs) == 1
    assert otel.total("hypaware.export.partitions.parked", **attrs) == 0
    assert otel.total("hypaware.export.partitions.lost", **attrs) == 0
    assert otel.total("hypaware.export.batch.duration", **attrs) == batches
    assert otel.total("hypaware.export.pass.duration", **{S: "arch"}) == 1
    assert otel.total("hypaware.export.lag.partitions", **attrs) == 1
    assert otel.total("hypaware.export.lag.rows", **attrs) == bad.row_count
    # The pass's one failure summary (one reason, one partition) is reported as an error.
    assert otel.total("hypaware.export.errors") == 1
    # The second observer saw the same export.
    assert counting.of("arch").partitions == len(parts) - 1 == report.sinks["arch"].partitions
    assert counting.of("arch").retries == 1

    (pass_span,) = otel.finished("hypaware.export.pass")
    assert pass_span.attributes is not None and pass_span.attributes[S] == "arch"
    batch_spans = otel.finished("hypaware.export.batch")
    assert len(batch_spans) == batches
    assert len(otel.finished()) == 1 + batches
    ids = {b.batch_id for b in sink.batches}
    for span in batch_spans:
        assert span.parent is not None
        assert span.parent.span_id == pass_span.context.span_id
        assert span.context.trace_id == pass_span.context.trace_id
        assert span.kind == SpanKind.INTERNAL
        assert span.attributes is not None
        assert span.attributes[S] == "arch" and span.attributes[D] == "events"
        assert span.attributes["hypaware.batch.id"] in ids
    failed = [s for s in batch_spans if s.status.status_code == StatusCode.ERROR]
    assert len(failed) == 1
    (event,) = [e for e in failed[0].events if e.name == "hypaware.partition.retried"]
    assert event.name == "hypaware.partition.retried"
    assert event.attributes is not None and event.attributes["hypaware.partition.id"] == bad.id
    (holding,) = [b for b in sink.batches if bad.id in {p.id for p in b.partitions}]
    assert failed[0].attributes is not None
    assert failed[0].attributes["hypaware.batch.id"] == holding.batch_id


async def test_a_raising_sink_is_an_error_on_its_batch_span(
    tmp_path: Path, otel: Telemetry
) -> None:
    cache = make_cache(tmp_path / "cache", count=6)
    sink = ScriptedSink()
    sink.mode = "raise"
    driver = ExportDriver(
        cache, sinks(("arch", sink)), state=tmp_path / "state", observer=otel.observer
    )
    try:
        await driver.run_once(backfill=True)
    finally:
        await driver.close()
    assert otel.total("hypaware.export.errors", **{S: "arch"}) == 1
    (batch_span,) = otel.finished("hypaware.export.batch")
    assert batch_span.status.status_code == StatusCode.ERROR
    errors = [e for e in batch_span.events if e.name == "hypaware.error"]
    assert len(errors) == 1 and errors[0].attributes is not None
    assert "destination exploded" in str(errors[0].attributes["hypaware.message"])
    (pass_span,) = otel.finished("hypaware.export.pass")
    assert pass_span.status.status_code == StatusCode.ERROR


def test_maintenance_runs_are_timed_and_counted(otel: Telemetry) -> None:
    from hypaware.core.types import MaintenanceReport

    done = MaintenanceReport(
        "lake", {"events": {"files_replaced": 12, "files_written": 2, "files_deleted": 30}}
    )
    failed = MaintenanceReport("lake", {"events": {}}, errors=("snapshot expiry: boom",))
    otel.observer.maintenance_finished("lake", done)
    otel.observer.maintenance_finished("lake", failed)
    assert otel.total("hypaware.maintenance.duration", **{S: "lake"}) == 2
    assert otel.total("hypaware.maintenance.duration", **{"hypaware.outcome": "error"}) == 1
    assert otel.total("hypaware.maintenance.files", **{"hypaware.action": "replaced"}) == 12
    assert otel.total("hypaware.maintenance.files", **{"hypaware.action": "deleted"}) == 30
    assert otel.total("hypaware.export.errors", **{"error.type": "maintenance"}) == 1
