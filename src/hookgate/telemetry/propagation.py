"""Trace context across process and HTTP boundaries (W3C Trace Context).

Out: a command hook gets ``TRACEPARENT``/``TRACESTATE`` in its environment, an HTTP hook
and the model endpoint get the ``traceparent`` header (through the configured propagators).
In: ``POST /api/runs`` with a ``traceparent`` header starts the run inside the caller's trace,
and the new run keeps that context in its state, so the worker that advances it (another
process, on PostgreSQL) continues the same trace.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from typing import Any

from hookgate.telemetry.names import STATE_TRACEPARENT
from hookgate.telemetry.switch import SWITCH


def subprocess_env() -> dict[str, str] | None:
    """The environment for a hook's subprocess: None (inherit) unless a span is current."""
    if not SWITCH.on:
        return None
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    if "traceparent" not in carrier:
        return None
    env = {k: v for k, v in os.environ.items() if k not in ("TRACEPARENT", "TRACESTATE")}
    env["TRACEPARENT"] = carrier["traceparent"]
    if carrier.get("tracestate"):
        env["TRACESTATE"] = carrier["tracestate"]
    return env


def with_trace_headers(headers: Mapping[str, str]) -> dict[str, str]:
    """``headers`` plus the current trace context (unchanged when telemetry is off)."""
    out = dict(headers)
    if SWITCH.on:
        from opentelemetry.propagate import inject

        inject(out)
    return out


@contextlib.contextmanager
def continue_trace(headers: Mapping[str, str]) -> Iterator[None]:
    """Make the caller's trace (its ``traceparent`` header) current inside the block.

    Tasks started inside the block (a run) copy the context, so they stay in that trace.
    """
    if not SWITCH.on or "traceparent" not in headers:
        yield
        return
    from opentelemetry import context
    from opentelemetry.propagate import extract

    token = context.attach(extract(dict(headers)))
    try:
        yield
    finally:
        context.detach(token)


def remember_trace(extra: dict[str, Any]) -> None:
    """Keep the current trace context (its W3C ``traceparent``) in a new run's ``extra``.

    Called where a server run is created, before it is handed to an executor: a queue job
    runs on any worker, where the caller's span is not current, and the run's span then
    takes this one as its parent (see `hookgate.telemetry.runs`).
    """
    if not SWITCH.on or STATE_TRACEPARENT in extra:
        return
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    carrier: dict[str, str] = {}
    TraceContextTextMapPropagator().inject(carrier)
    if "traceparent" in carrier:
        extra[STATE_TRACEPARENT] = carrier["traceparent"]
