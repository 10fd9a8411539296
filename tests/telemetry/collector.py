"""A loopback OTLP/HTTP collector for tests, written from the OTLP specification: it takes
protobuf ``ExportTraceServiceRequest`` and ``ExportMetricsServiceRequest`` bodies on
``/v1/traces`` and ``/v1/metrics`` and keeps what arrived."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.metrics.v1.metrics_service_pb2 import (
    ExportMetricsServiceRequest,
    ExportMetricsServiceResponse,
)
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass(frozen=True)
class ReceivedSpan:
    name: str
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    service_name: str
    scope: str


@dataclass
class Collector:
    url: str = ""
    spans: list[ReceivedSpan] = field(default_factory=list)
    metric_names: set[str] = field(default_factory=set)
    content_types: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def named(self, prefix: str) -> list[ReceivedSpan]:
        with self.lock:
            return [s for s in self.spans if s.name.startswith(prefix)]

    def scoped(self, scope: str) -> list[ReceivedSpan]:
        with self.lock:
            return [s for s in self.spans if s.scope == scope]


def _value(v: AnyValue) -> Any:
    kind = v.WhichOneof("value")
    if kind == "array_value":
        return [_value(x) for x in v.array_value.values]
    return getattr(v, kind) if kind else None


def _attributes(kvs: Any) -> dict[str, Any]:
    return {kv.key: _value(kv.value) for kv in kvs}


@contextmanager
def collector() -> Iterator[Collector]:
    got = Collector()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            if self.headers.get("Content-Encoding") == "gzip":
                body = gzip.decompress(body)
            with got.lock:
                got.content_types.add(self.headers.get("Content-Type", ""))
            if self.path == "/v1/traces":
                self._traces(body)
                reply = ExportTraceServiceResponse().SerializeToString()
            elif self.path == "/v1/metrics":
                request = ExportMetricsServiceRequest.FromString(body)
                with got.lock:
                    for rm in request.resource_metrics:
                        for sm in rm.scope_metrics:
                            got.metric_names.update(m.name for m in sm.metrics)
                reply = ExportMetricsServiceResponse().SerializeToString()
            else:
                self.send_error(404)
                return
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def _traces(self, body: bytes) -> None:
            request = ExportTraceServiceRequest.FromString(body)
            with got.lock:
                for rs in request.resource_spans:
                    service = _attributes(rs.resource.attributes).get("service.name", "")
                    for ss in rs.scope_spans:
                        for s in ss.spans:
                            got.spans.append(ReceivedSpan(
                                s.name, s.trace_id.hex(), s.span_id.hex(),
                                s.parent_span_id.hex(), _attributes(s.attributes), service,
                                ss.scope.name))

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    got.url = f"http://127.0.0.1:{server.server_address[1]}"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield got
    finally:
        server.shutdown()
        server.server_close()
