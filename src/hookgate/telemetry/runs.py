"""``invoke_agent {agent}`` (and ``invoke_workflow {workflow}``) spans, one per run.

`traced_run` decorates an engine's ``_drive(driver, ...)``. The span's parent is the current
span (a delegating call, the caller's trace on ``POST /api/runs``, the embedding app's span);
failing that, the trace the run remembered in its state, so a run resumed after a restart
goes on in the trace it started in.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

from hookgate.telemetry import names, values
from hookgate.telemetry.instruments import instruments
from hookgate.telemetry.models import provider_of
from hookgate.telemetry.switch import refresh

if TYPE_CHECKING:
    from hookgate.engines.driver import RunDriver

P = ParamSpec("P")
E = TypeVar("E")
Body = Coroutine[Any, Any, None]
Drive = Callable[Concatenate[E, "RunDriver", P], Body]

#: Run statuses that mean the run did not do its job.
_FAILED = frozenset({"failed", "blocked_build", "session_blocked", "max_steps", "cancelled"})


def traced_run(operation: str = names.OP_INVOKE_AGENT) -> Callable[[Drive[E, P]], Drive[E, P]]:
    """Decorate an engine's ``_drive`` so each run is a span when telemetry is on."""

    def decorate(fn: Drive[E, P]) -> Drive[E, P]:
        def drive(engine: E, d: RunDriver, /, *args: P.args, **kwargs: P.kwargs) -> Body:
            if not refresh():
                return fn(engine, d, *args, **kwargs)
            return _traced(operation, fn(engine, d, *args, **kwargs), engine, d)

        functools.update_wrapper(drive, fn)
        return drive

    return decorate


async def _traced(operation: str, body: Body, engine: Any, d: RunDriver) -> None:
    from opentelemetry import trace
    from opentelemetry.trace import SpanKind, StatusCode
    from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

    w3c = TraceContextTextMapPropagator()
    state, agent = d.state, d.agent
    parent = None
    stored = state.extra.get(names.STATE_TRACEPARENT)
    if not trace.get_current_span().get_span_context().is_valid and isinstance(stored, str):
        parent = w3c.extract({"traceparent": stored})
    attrs: dict[str, Any] = {
        names.OPERATION_NAME: operation,
        names.AGENT_ID: values.name(agent.id),
        names.AGENT_NAME: values.name(agent.name),
        names.RUN_ID: state.run_id,
        names.RUN_ENGINE: state.engine,
        names.EXECUTION_PATH: d.lineage.execution_path,
        names.DEPTH: d.lineage.depth,
    }
    provider = provider_of(getattr(engine, "llm", None))
    if provider:
        attrs[names.PROVIDER_NAME] = provider
    if state.conversation_id:
        attrs[names.CONVERSATION_ID] = values.name(state.conversation_id)
    if state.org_id:
        attrs[names.ORG_ID] = values.name(state.org_id)
    if d.lineage.parent_agent_id:
        attrs[names.PARENT_AGENT_ID] = values.name(d.lineage.parent_agent_id)
    label = agent.name or agent.id
    if operation == names.OP_INVOKE_WORKFLOW:
        label = str((state.extra.get("workflow") or {}).get("id") or label)
        attrs[names.WORKFLOW_NAME] = values.name(label)
    span_name = f"{operation} {values.name(label)}"
    with instruments().tracer.start_as_current_span(span_name, context=parent,
                                                    kind=SpanKind.INTERNAL,
                                                    attributes=attrs) as span:
        if names.STATE_TRACEPARENT not in state.extra:
            carrier: dict[str, str] = {}
            # Remember this span: the span of the run resumed after a restart is its child.
            w3c.inject(carrier)
            if "traceparent" in carrier:
                state.extra[names.STATE_TRACEPARENT] = carrier["traceparent"]
        await body
        span.set_attribute(names.RUN_STATUS, state.status)
        if state.status in _FAILED:
            span.set_attribute(names.ERROR_TYPE, state.status)
            span.set_status(StatusCode.ERROR, values.text(state.error or state.status))
