"""OpenTelemetry for the export driver: an `ExportObserver` recording metrics and spans.

Install the extra (``pip install 'hypaware[otel]'``), configure the
OpenTelemetry SDK as the host does (exporters, resource), and hand the
driver an `OTelObserver` (beside any other observer)::

    ExportDriver.from_config(config, observer=[OTelObserver(), CountingObserver()])

Metrics (see docs/observability.md for the table) count rows, bytes, files,
batches and partitions exported, partitions retried, parked and lost,
errors and retry waits (by cause); histograms time batches, passes, waits and
HTTP requests (``http.client.request.duration``, OpenTelemetry's semantic
convention); gauges give the lag in rows and partitions. Spans: one per
pass, a child per batch (``hypaware.sink``, ``hypaware.dataset``,
``hypaware.batch.id``), and under a batch one CLIENT span per HTTP request a
request sink made. This module is imported only by whoever uses it, so
``import hypaware`` never loads OpenTelemetry.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from opentelemetry import metrics, trace
from opentelemetry.metrics import CallbackOptions, MeterProvider, Observation
from opentelemetry.trace import SpanKind, Status, StatusCode, TracerProvider

from hypaware._version import __version__
from hypaware.core.types import RequestEvent
from hypaware.export.observer import NullObserver

if TYPE_CHECKING:
    from hypaware.core.types import MaintenanceReport
    from hypaware.export.reports import SinkReport

__all__ = ["OTelObserver"]

SINK = "hypaware.sink"
DATASET = "hypaware.dataset"
BATCH_ID = "hypaware.batch.id"
CAUSE = "hypaware.retry.cause"
_SCOPE = "hypaware"


class OTelObserver(NullObserver):
    """Records the driver's work as OpenTelemetry metrics and spans.

    `meter_provider` / `tracer_provider` default to the globally configured
    ones (OpenTelemetry's no-op providers when the host configured none).
    """

    def __init__(
        self,
        *,
        meter_provider: MeterProvider | None = None,
        tracer_provider: TracerProvider | None = None,
    ) -> None:
        meter = metrics.get_meter(_SCOPE, __version__, meter_provider=meter_provider)
        self._tracer = trace.get_tracer(_SCOPE, __version__, tracer_provider=tracer_provider)
        counter = meter.create_counter
        self._rows = counter("hypaware.export.rows", "{row}", "Rows exported")
        self._bytes = counter("hypaware.export.bytes", "By", "Bytes written by sinks")
        self._files = counter("hypaware.export.files", "{file}", "Files written by sinks")
        self._batches = counter("hypaware.export.batches", "{batch}", "Batches handed back")
        self._partitions = counter(
            "hypaware.export.partitions", "{partition}", "Partitions exported"
        )
        self._retried = counter(
            "hypaware.export.partitions.retried", "{partition}", "Partitions respooled"
        )
        self._parked = counter(
            "hypaware.export.partitions.parked",
            "{partition}",
            "Respooled partitions that retrying cannot help",
        )
        self._lost = counter(
            "hypaware.export.partitions.lost", "{partition}", "Partitions the cache lost"
        )
        self._errors = counter("hypaware.export.errors", "{error}", "Failures reported")
        self._waits = counter("hypaware.export.retry.waits", "{wait}", "Backoff waits")
        histogram = meter.create_histogram
        self._batch_time = histogram(
            "hypaware.export.batch.duration", "s", "Time a sink took for one batch"
        )
        self._pass_time = histogram("hypaware.export.pass.duration", "s", "Time of one pass")
        self._wait_time = histogram(
            "hypaware.export.retry.wait.duration", "s", "Backoff waits before a retry"
        )
        self._request_time = histogram(
            "http.client.request.duration", "s", "Duration of HTTP client requests"
        )
        self._maintenance_time = histogram(
            "hypaware.maintenance.duration", "s", "Time of one maintenance run of a sink"
        )
        self._maintained = counter(
            "hypaware.maintenance.files",
            "{file}",
            "Files maintenance compacted away (replaced), wrote or deleted",
        )
        self._lag: dict[tuple[str, str], tuple[int, int]] = {}
        meter.create_observable_gauge(
            "hypaware.export.lag.rows", [self._lag_rows], "{row}", "Rows ready, not exported"
        )
        meter.create_observable_gauge(
            "hypaware.export.lag.partitions",
            [self._lag_partitions],
            "{partition}",
            "Partitions ready, not exported",
        )
        self._passes: dict[str, trace.Span] = {}
        self._batch_spans: dict[tuple[str, str, str], trace.Span] = {}

    # ------------------------------------------------------------------ spans

    def pass_started(self, sink: str) -> None:
        self._passes[sink] = self._tracer.start_span(
            "hypaware.export.pass", attributes={SINK: sink}
        )

    def pass_finished(self, sink: str, report: SinkReport) -> None:
        errors = len(report.errors)
        self._pass_time.record(report.seconds, {SINK: sink})
        span = self._passes.pop(sink, None)
        if span is None:
            return
        span.set_attribute("hypaware.errors", errors)
        if errors:
            span.set_status(Status(StatusCode.ERROR, f"{errors} error(s)"))
        span.end()

    def batch_started(self, sink: str, dataset: str, *, batch_id: str, partitions: int) -> None:
        parent = self._passes.get(sink)
        context = trace.set_span_in_context(parent) if parent is not None else None
        self._batch_spans[(sink, dataset, batch_id)] = self._tracer.start_span(
            "hypaware.export.batch",
            context=context,
            attributes={
                SINK: sink,
                DATASET: dataset,
                BATCH_ID: batch_id,
                "hypaware.batch.partitions": partitions,
            },
        )

    def batch_exported(
        self,
        sink: str,
        dataset: str,
        *,
        batch_id: str,
        partitions: int,
        rows: int,
        bytes: int,
        files: int,
        seconds: float,
    ) -> None:
        attrs = {SINK: sink, DATASET: dataset}
        self._batches.add(1, attrs)
        self._partitions.add(partitions, attrs)
        self._rows.add(rows, attrs)
        self._bytes.add(bytes, attrs)
        self._files.add(files, attrs)
        self._batch_time.record(seconds, attrs)
        span = self._batch_spans.pop((sink, dataset, batch_id), None)
        if span is not None:
            span.set_attributes(
                {
                    "hypaware.batch.exported": partitions,
                    "hypaware.batch.rows": rows,
                    "hypaware.batch.bytes": bytes,
                    "hypaware.batch.files": files,
                }
            )
            span.end()

    def partitions_retried(
        self, sink: str, dataset: str, partition_ids: Sequence[str], reasons: Sequence[str]
    ) -> None:
        self._retried.add(len(partition_ids), {SINK: sink, DATASET: dataset})
        for span in self._spans_of(sink, dataset):
            span.set_attribute("hypaware.batch.retried", len(partition_ids))
            span.set_status(Status(StatusCode.ERROR, f"{len(partition_ids)} partition(s) retried"))
            for pid, reason in zip(partition_ids, reasons, strict=False):
                span.add_event(
                    "hypaware.partition.retried",
                    {"hypaware.partition.id": pid, "hypaware.reason": reason},
                )

    def partitions_parked(
        self, sink: str, dataset: str, partition_ids: Sequence[str], reasons: Sequence[str]
    ) -> None:
        self._parked.add(len(partition_ids), {SINK: sink, DATASET: dataset})

    def partitions_lost(self, sink: str, dataset: str, partition_ids: Sequence[str]) -> None:
        self._lost.add(len(partition_ids), {SINK: sink, DATASET: dataset})

    def retry_wait(
        self, sink: str, dataset: str, *, batch_id: str, seconds: float, cause: str
    ) -> None:
        attrs = {SINK: sink, DATASET: dataset, CAUSE: cause}
        self._waits.add(1, attrs)
        self._wait_time.record(seconds, attrs)
        span = self._batch_spans.get((sink, dataset, batch_id))
        if span is not None:
            span.add_event("hypaware.retry.wait", {CAUSE: cause, "hypaware.wait.seconds": seconds})

    def request_finished(
        self, sink: str, dataset: str, *, batch_id: str, event: RequestEvent
    ) -> None:
        url = urlsplit(event.url)
        attrs: dict[str, str | int] = {"http.request.method": event.method, SINK: sink}
        if url.hostname:
            attrs["server.address"] = url.hostname
        port = url.port or (443 if url.scheme == "https" else 80 if url.scheme == "http" else None)
        if port is not None:
            attrs["server.port"] = port
        if event.status is not None:
            attrs["http.response.status_code"] = event.status
        # Semantic conventions: the status code for an HTTP error, else what failed.
        if event.status is not None and event.status >= 400:
            attrs["error.type"] = str(event.status)
        elif event.error is not None:
            attrs["error.type"] = event.error
        self._request_time.record(event.seconds, attrs)
        parent = self._batch_spans.get((sink, dataset, batch_id))
        context = trace.set_span_in_context(parent) if parent is not None else None
        span = self._tracer.start_span(
            event.method,
            context=context,
            kind=SpanKind.CLIENT,
            attributes={**attrs, "url.full": event.url},
            start_time=event.started_ns,
        )
        if "error.type" in attrs:
            span.set_status(Status(StatusCode.ERROR))
        span.end(end_time=event.started_ns + int(event.seconds * 1e9))

    def error(self, sink: str | None, message: str) -> None:
        self._errors.add(1, {SINK: sink} if sink is not None else {})
        spans = list(self._spans_of(sink, None)) if sink is not None else []
        if not spans and sink is not None and sink in self._passes:
            spans = [self._passes[sink]]
        for span in spans:
            span.add_event("hypaware.error", {"hypaware.message": message})
            span.set_status(Status(StatusCode.ERROR, message))

    def maintenance_finished(self, sink: str, report: MaintenanceReport) -> None:
        outcome = "ok" if report.ok else "error"
        self._maintenance_time.record(report.seconds, {SINK: sink, "hypaware.outcome": outcome})
        for key, action in (
            ("files_replaced", "replaced"),
            ("files_written", "written"),
            ("files_deleted", "deleted"),
        ):
            count = report.total(key)
            if count:
                self._maintained.add(count, {SINK: sink, "hypaware.action": action})
        if not report.ok:
            self._errors.add(len(report.errors), {SINK: sink, "error.type": "maintenance"})

    def lag(self, sink: str, dataset: str, *, partitions: int, rows: int) -> None:
        self._lag[(sink, dataset)] = (partitions, rows)

    # --------------------------------------------------------------- helpers

    def _spans_of(self, sink: str, dataset: str | None) -> Iterable[trace.Span]:
        return [
            span
            for (s, d, _), span in self._batch_spans.items()
            if s == sink and (dataset is None or d == dataset)
        ]

    # Gauges are read on the metric reader's thread: iterate over a copy.
    def _lag_rows(self, _options: CallbackOptions) -> Iterable[Observation]:
        lag = list(self._lag.items())
        return [Observation(r, {SINK: s, DATASET: d}) for (s, d), (_, r) in lag]

    def _lag_partitions(self, _options: CallbackOptions) -> Iterable[Observation]:
        lag = list(self._lag.items())
        return [Observation(p, {SINK: s, DATASET: d}) for (s, d), (p, _) in lag]
