"""``execute_tool {tool}`` spans and the tool-call counter, around the one guarded path.

`traced_tool_call` decorates `execute_tool_call`; with telemetry off the decorated function
is called straight away (no span, no extra coroutine). The outcome, not the raw tool
result, is what lands on the span: it is what the model saw, after every PostToolUse rewrite,
and a withheld output is never there.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, ParamSpec

from hookgate.hooks.withheld import mask_text
from hookgate.telemetry import names, values
from hookgate.telemetry.instruments import instruments
from hookgate.telemetry.switch import SWITCH, capture_content

if TYPE_CHECKING:
    from hookgate.tools.calls import ToolOutcome
    from hookgate.tools.guarded_call import GuardedCall, RefusedCall

P = ParamSpec("P")

#: error.type for each outcome of a call that did not end well.
ERROR_TYPES = {
    "blocked": "blocked",
    "invalid": "invalid_arguments",
    "unknown_tool": "unknown_tool",
    "error": "tool_error",
    "withheld": "output_withheld",
}


Outcome = Coroutine[Any, Any, "ToolOutcome"]


def traced_tool_call(fn: Callable[P, Outcome]) -> Callable[P, Outcome]:
    """Wrap the guarded path so each call is an ``execute_tool`` span when telemetry is on."""

    def call(*args: P.args, **kwargs: P.kwargs) -> Outcome:
        if not SWITCH.on:
            return fn(*args, **kwargs)
        return _traced(fn, args, kwargs)

    functools.update_wrapper(call, fn)
    return call


async def _traced(fn: Callable[..., Outcome], args: tuple[Any, ...],
                  kwargs: dict[str, Any]) -> ToolOutcome:
    from opentelemetry.trace import SpanKind, StatusCode

    call: GuardedCall | RefusedCall = args[0] if args else kwargs["call"]
    tool = call.tool
    identity = call.identity
    # An unknown name is whatever the model sent: keep it off span names and metric labels.
    tool_name = values.name(call.name) if tool is not None else "(unknown)"
    attrs: dict[str, Any] = {
        names.OPERATION_NAME: names.OP_EXECUTE_TOOL,
        names.TOOL_NAME: values.name(call.name),
        names.TOOL_CALL_ID: values.name(call.call_id),
        names.TOOL_TYPE: "function",
    }
    if tool is not None:
        attrs[names.TOOL_DESCRIPTION] = values.text(tool.description)
        attrs[names.TOOL_WRITES] = bool(tool.writes)
        if tool.connector:
            attrs[names.TOOL_CONNECTOR] = values.name(tool.connector)
    attrs[names.AGENT_ID] = values.name(identity.agent_id)
    attrs[names.RUN_ID] = identity.run_id
    attrs[names.EXECUTION_PATH] = identity.execution_path
    ins = instruments()
    span_name = f"execute_tool {tool_name}" if tool is not None else "execute_tool"
    with ins.tracer.start_as_current_span(span_name, kind=SpanKind.INTERNAL,
                                          attributes=attrs) as span:
        outcome = await fn(*args, **kwargs)
        span.set_attribute(names.TOOL_OUTCOME, outcome.status)
        if outcome.blocked_by:
            span.set_attribute(names.TOOL_BLOCKED_BY, values.name(outcome.blocked_by))
        error_type = ERROR_TYPES.get(outcome.status)
        if error_type is not None:
            span.set_attribute(names.ERROR_TYPE, error_type)
            # A tool's error is a Withheld (str(): the tool and the exception type); a block's
            # reason is what the model read, masked.
            span.set_status(StatusCode.ERROR,
                            values.text(mask_text(str(outcome.error or outcome.status))))
        if capture_content():
            span.set_attribute(names.TOOL_CALL_ARGUMENTS, values.masked_arguments(outcome.args))
            if outcome.allowed:
                span.set_attribute(names.TOOL_CALL_RESULT, values.content(outcome.observation))
    labels = {names.TOOL_NAME: tool_name, names.TOOL_OUTCOME: outcome.status}
    if outcome.blocked_by:
        labels[names.TOOL_BLOCKED_BY] = values.name(outcome.blocked_by)
    ins.tool_calls.add(1, labels)
    return outcome
