"""A real OpenTelemetry SDK per test: spans into an in-memory exporter, metrics into an
in-memory reader. The API lets a process set its global providers once; between tests the
globals are put back to "never set" (as OpenTelemetry's own test utilities do), so the
tests outside this folder keep running with telemetry off."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from mcp.shared import _otel as mcp_otel
from opentelemetry import metrics, trace
from opentelemetry.metrics import _internal as metrics_internal
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from hookgate.telemetry.switch import SWITCH, refresh


def reset_globals() -> None:
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    metrics_internal._METER_PROVIDER_SET_ONCE = Once()
    metrics_internal._METER_PROVIDER = None
    SWITCH.capture_content = False
    SWITCH.mask_patterns = ()
    # The MCP SDK takes its tracer once, at import, and that proxy sticks to the first
    # provider it saw: give it a fresh one, so each test's provider gets the SDK's spans.
    mcp_otel._tracer = trace.get_tracer("mcp-python-sdk")
    refresh()


@dataclass
class Otel:
    spans_exporter: InMemorySpanExporter
    reader: InMemoryMetricReader

    def spans(self) -> list[ReadableSpan]:
        return list(self.spans_exporter.get_finished_spans())

    def named(self, name: str) -> list[ReadableSpan]:
        return [s for s in self.spans() if s.name == name]

    def one(self, name: str) -> ReadableSpan:
        found = self.named(name)
        assert len(found) == 1, f"{len(found)} spans named {name!r}: {self.names()}"
        return found[0]

    def names(self) -> list[str]:
        return sorted(s.name for s in self.spans())

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        assert parent.context is not None
        return [s for s in self.spans()
                if s.parent is not None and s.parent.span_id == parent.context.span_id]

    def points(self, metric: str) -> list[Any]:
        data = self.reader.get_metrics_data()
        out: list[Any] = []
        for rm in data.resource_metrics if data else []:
            for sm in rm.scope_metrics:
                for m in sm.metrics:
                    if m.name == metric:
                        out.extend(m.data.data_points)
        return out


@pytest.fixture
def otel() -> Iterator[Otel]:
    reset_globals()
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    reader = InMemoryMetricReader()
    trace.set_tracer_provider(provider)
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
    assert refresh(), "a real provider is installed, so telemetry must be on"
    try:
        yield Otel(exporter, reader)
    finally:
        provider.shutdown()
        reset_globals()
