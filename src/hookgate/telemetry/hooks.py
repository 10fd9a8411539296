"""``hookgate.hook {name}`` spans and the hook-latency histogram.

The registry takes each hook's ``execute`` once, at registration; while telemetry is on,
`switch.refresh` has it take `traced_execute(hook)` instead, so with telemetry off the
chains' fast paths stay exactly as they are. A span never carries what a hook raised or
printed (it may quote the tool's raw output): a failure is its exception type, and a
PreToolUse block's reason is masked. Outcomes: ``ok`` (changed nothing), ``blocked``,
``rewrote``, ``context`` (SessionStart text), ``failed``, ``timeout``, ``cancelled``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from hookgate.hooks.model import HookPoint, HookResult
from hookgate.hooks.withheld import mask_text
from hookgate.telemetry import names, values
from hookgate.telemetry.instruments import instruments

if TYPE_CHECKING:
    from hookgate.hooks.model import HookContext, _Hook

Execute = Callable[["HookContext"], Awaitable[Any]]


def traced_execute(hook: _Hook) -> Execute:
    """The callable the registry runs for ``hook`` while telemetry is on: timed and traced."""
    execute: Execute = hook.execute
    name, point, timeout = values.name(hook.name), hook.point.value, hook.timeout
    gives_reason = hook.point is HookPoint.PRE_TOOL_USE
    base = {names.HOOK_NAME: name, names.HOOK_POINT: point}
    span_attrs = {**base, names.HOOK_FAIL_MODE: hook.fail_mode}
    span_name = f"{names.HOOK_SPAN} {name}"

    async def run(ctx: HookContext) -> Any:
        from opentelemetry.trace import StatusCode

        ins = instruments()
        started = time.perf_counter()
        outcome = "failed"
        with ins.tracer.start_as_current_span(span_name, attributes=span_attrs,
                                              record_exception=False,
                                              set_status_on_exception=False) as span:
            try:
                result = await execute(ctx)
            except asyncio.CancelledError:
                # The registry's timeout scope cancels the hook from outside; a hook that
                # declared a timeout and ran that long was timed out, not cancelled.
                waited = time.perf_counter() - started
                outcome = "timeout" if timeout is not None and waited >= timeout * 0.99 else (
                    "cancelled")
                span.set_attribute(names.ERROR_TYPE, outcome)
                span.set_status(StatusCode.ERROR, f"hook '{name}' {outcome}")
                raise
            except Exception as exc:
                # The exception's type only: its message and traceback may quote the output.
                said = f"hook '{name}' failed ({type(exc).__name__})"
                span.add_event("exception", {"exception.type": type(exc).__qualname__,
                                             "exception.message": said})
                span.set_attribute(names.ERROR_TYPE, type(exc).__qualname__)
                span.set_status(StatusCode.ERROR, said)
                raise
            else:
                outcome = _outcome(result)
                if outcome == "failed":
                    span.set_attribute(names.ERROR_TYPE, "invalid_result")
                    span.set_status(StatusCode.ERROR, f"returned {type(result).__name__}, "
                                                      "not a HookResult")
                elif outcome == "blocked" and result.error and gives_reason:
                    # Only a PreToolUse block has a reason (the model reads it); a hook that
                    # "blocks" after the tool ran may be quoting the tool's output.
                    span.set_attribute(names.HOOK_REASON, values.text(mask_text(result.error)))
            finally:
                span.set_attribute(names.HOOK_OUTCOME, outcome)
                ins.hook_duration.record(time.perf_counter() - started,
                                         {**base, names.HOOK_OUTCOME: outcome})
        return result

    return run


def _outcome(result: Any) -> str:
    if not isinstance(result, HookResult):
        return "failed"
    if not result.allow:
        return "blocked"
    if result.modified_args is not None or result.modified_result is not None:
        return "rewrote"
    if result.additional_context:
        return "context"
    return "ok"
