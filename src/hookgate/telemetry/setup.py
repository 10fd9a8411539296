"""Installing the OpenTelemetry SDK for ``hookgate serve`` / ``hookgate run``.

Only the standard ``OTEL_*`` variables and the optional ``telemetry:`` section decide:
telemetry is on when the section says ``enabled: true`` or, by default, when an OTLP
endpoint or an exporter variable is set. A provider installed by someone else (e.g.
``opentelemetry-instrument``) is used as it is. The SDK and exporter come with
``pip install 'hookgate[otel]'``.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from hookgate.telemetry.switch import SWITCH, refresh, sdk_disabled

log = logging.getLogger(__name__)

#: Variables that, set, mean "send telemetry" when the section does not say.
_EXPORT_VARIABLES = (
    "OTEL_EXPORTER_OTLP_ENDPOINT",
    "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
    "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT",
    "OTEL_TRACES_EXPORTER",
    "OTEL_METRICS_EXPORTER",
)
DEFAULT_SERVICE_NAME = "hookgate"
_GRPC_MODULES = {"traces": ("trace_exporter", "OTLPSpanExporter"),
                 "metrics": ("metric_exporter", "OTLPMetricExporter")}


class TelemetrySetupError(RuntimeError):
    """Telemetry was asked for and cannot be set up; the message says why and what to do."""


@dataclass(frozen=True, slots=True)
class TelemetrySettings:
    """The ``telemetry:`` section: every field is optional."""

    enabled: bool | None = None
    service_name: str | None = None
    endpoint: str | None = None
    capture_content: bool = False
    mask_patterns: Sequence[str] = field(default_factory=tuple)


def wanted(settings: TelemetrySettings) -> bool:
    """Whether hookgate should install the SDK itself."""
    environ = os.environ
    if sdk_disabled():
        return False
    if settings.enabled is not None:
        return settings.enabled
    if settings.endpoint:
        return True
    return any(environ.get(v, "").strip() not in ("", "none") for v in _EXPORT_VARIABLES)


def install(settings: TelemetrySettings) -> bool:
    """Set up tracing and metrics as ``settings`` and the environment say; True if on."""
    SWITCH.capture_content = settings.capture_content
    SWITCH.mask_patterns = tuple(settings.mask_patterns)
    if refresh():
        return True  # a provider is already installed: hookgate reports to it
    if not wanted(settings):
        return False
    try:
        _install_sdk(settings)
    except ImportError as exc:
        msg = (f"telemetry is on but the OpenTelemetry SDK or exporter is missing ({exc}); "
               "install it with: pip install 'hookgate[otel]'")
        if settings.enabled:
            raise TelemetrySetupError(msg) from None
        log.warning("%s; going on without telemetry", msg)
        return False
    return refresh()


def _install_sdk(settings: TelemetrySettings) -> None:
    from opentelemetry import metrics, trace
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import MetricReader, PeriodicExportingMetricReader
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    resource = Resource.create({})
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource.create(
            {"service.name": settings.service_name or DEFAULT_SERVICE_NAME}))
    tracer_provider = TracerProvider(resource=resource)
    span_exporter = _exporter("traces", settings.endpoint)
    if span_exporter is not None:
        tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
    readers: list[MetricReader] = []
    metric_exporter = _exporter("metrics", settings.endpoint)
    if metric_exporter is not None:
        readers.append(PeriodicExportingMetricReader(metric_exporter))
    trace.set_tracer_provider(tracer_provider)
    metrics.set_meter_provider(MeterProvider(resource=resource, metric_readers=readers))


def _exporter(signal: str, endpoint: str | None) -> Any:
    """The exporter OTEL_<SIGNAL>_EXPORTER names (otlp by default, console, none)."""
    kind = os.environ.get(f"OTEL_{signal.upper()}_EXPORTER", "otlp").strip().lower()
    if kind == "none":
        return None
    if kind == "console":
        if signal == "traces":
            from opentelemetry.sdk.trace.export import ConsoleSpanExporter

            return ConsoleSpanExporter()
        from opentelemetry.sdk.metrics.export import ConsoleMetricExporter

        return ConsoleMetricExporter()
    if kind != "otlp":
        raise TelemetrySetupError(
            f"OTEL_{signal.upper()}_EXPORTER={kind!r} is not supported by hookgate's setup "
            "(use otlp, console or none, or run under opentelemetry-instrument)")
    protocol = os.environ.get(f"OTEL_EXPORTER_OTLP_{signal.upper()}_PROTOCOL") or os.environ.get(
        "OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
    # An endpoint given in code is used as it is; only the base URL of the environment
    # variable gets the signal's path appended by the exporter, so do the same here.
    url = f"{endpoint.rstrip('/')}/v1/{signal}" if endpoint else None
    if protocol.strip() == "grpc":
        # Not in hookgate's extra (it pulls in grpcio); used when the user installed it.
        module = importlib.import_module(
            f"opentelemetry.exporter.otlp.proto.grpc.{_GRPC_MODULES[signal][0]}")
        return getattr(module, _GRPC_MODULES[signal][1])(endpoint=endpoint)
    if protocol.strip() != "http/protobuf":
        raise TelemetrySetupError(
            f"OTLP protocol {protocol!r} is not supported (use http/protobuf or grpc)")
    if signal == "traces":
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        return OTLPSpanExporter(endpoint=url)
    from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

    return OTLPMetricExporter(endpoint=url)
