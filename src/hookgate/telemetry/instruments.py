"""hookgate's metric instruments and tracer, made once on first use (telemetry on).

Instruments and the tracer obtained through the API's global providers keep working when
the provider is set later, so one set per process is enough.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING

from hookgate.telemetry import names
from hookgate.telemetry.switch import meter, tracer

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, Histogram, UpDownCounter
    from opentelemetry.trace import Tracer

#: Buckets (seconds) for waits on people: from a quick tap to a day.
_WAIT_BUCKETS = (1.0, 5.0, 15.0, 60.0, 300.0, 900.0, 3600.0, 14400.0, 86400.0)
#: Buckets (seconds) for hooks: most take microseconds, command and HTTP hooks milliseconds.
_HOOK_BUCKETS = (0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 30.0)
#: The GenAI conventions' advised buckets for gen_ai.client.operation.duration.
_CLIENT_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48,
                   40.96, 81.92)

#: The MCP conventions' advised buckets for mcp.{client,server}.operation.duration.
_MCP_BUCKETS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


@dataclass(frozen=True, slots=True)
class Instruments:
    tracer: Tracer
    tool_calls: Counter
    hook_duration: Histogram
    approvals_pending: UpDownCounter
    approval_wait: Histogram
    delivery_failures: Counter
    client_duration: Histogram
    client_tokens: Histogram
    mcp_client_duration: Histogram
    mcp_server_duration: Histogram


@cache
def instruments() -> Instruments:
    m = meter()
    return Instruments(
        tracer=tracer(),
        tool_calls=m.create_counter(
            names.M_TOOL_CALLS, unit="{call}",
            description="Tool calls through the guarded path, by outcome and blocking hook."),
        hook_duration=m.create_histogram(
            names.M_HOOK_DURATION, unit="s", description="How long each hook took.",
            explicit_bucket_boundaries_advisory=_HOOK_BUCKETS),
        approvals_pending=m.create_up_down_counter(
            names.M_APPROVALS_PENDING, unit="{request}",
            description="Approval requests this process is waiting on right now."),
        approval_wait=m.create_histogram(
            names.M_APPROVAL_WAIT, unit="s",
            description="From an approval request's creation to its decision.",
            explicit_bucket_boundaries_advisory=_WAIT_BUCKETS),
        delivery_failures=m.create_counter(
            names.M_DELIVERY_FAILURES, unit="{failure}",
            description="Chat-platform sends that failed for good (after retries)."),
        client_duration=m.create_histogram(
            names.M_CLIENT_DURATION, unit="s", description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=_CLIENT_BUCKETS),
        client_tokens=m.create_histogram(
            names.M_CLIENT_TOKENS, unit="{token}", description="Number of tokens used."),
        mcp_client_duration=m.create_histogram(
            names.M_MCP_CLIENT_DURATION, unit="s",
            description="MCP requests hookgate sent to downstream servers, until the answer.",
            explicit_bucket_boundaries_advisory=_MCP_BUCKETS),
        mcp_server_duration=m.create_histogram(
            names.M_MCP_SERVER_DURATION, unit="s",
            description="MCP requests clients sent to hookgate, until it answered.",
            explicit_bucket_boundaries_advisory=_MCP_BUCKETS),
    )
