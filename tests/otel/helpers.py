"""OpenTelemetry SDK providers with in-memory exporters, and readers of what they hold."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from hypaware.export.otel import OTelObserver


class Telemetry:
    """An `OTelObserver` wired to in-memory exporters."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.meters = MeterProvider(metric_readers=[self.reader])
        self.spans = InMemorySpanExporter()
        self.tracers = TracerProvider()
        self.tracers.add_span_processor(SimpleSpanProcessor(self.spans))
        self.observer = OTelObserver(meter_provider=self.meters, tracer_provider=self.tracers)

    def close(self) -> None:
        self.meters.shutdown()
        self.tracers.shutdown()

    def points(self, name: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        found: list[Any] = []
        for resource in data.resource_metrics if data else ():
            for scope in resource.scope_metrics:
                for metric in scope.metrics:
                    if metric.name == name:
                        found.extend(metric.data.data_points)
        return found

    def total(self, name: str, **attrs: Any) -> float:
        """The sum of a counter's points (or the count of a histogram's) matching `attrs`."""
        out = 0.0
        for point in self.points(name):
            if all(point.attributes.get(k) == v for k, v in attrs.items()):
                out += point.count if hasattr(point, "count") else point.value
        return out

    def finished(self, name: str | None = None) -> list[ReadableSpan]:
        spans = list(self.spans.get_finished_spans())
        return [s for s in spans if name is None or s.name == name]
