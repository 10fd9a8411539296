"""``chat {model}`` spans and the GenAI client metrics, around hookgate's model clients.

`traced_chat` decorates a client's ``complete``; the span carries the request model, the
provider, the endpoint and, when the client reports them, the response id, model, finish
reasons and token usage. Message content is not recorded.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar
from urllib.parse import urlsplit

from hookgate.telemetry import names, values
from hookgate.telemetry.instruments import instruments
from hookgate.telemetry.switch import SWITCH

if TYPE_CHECKING:
    from hookgate.llm.base import ModelTurn

M = TypeVar("M")
P = ParamSpec("P")
Turn = Coroutine[Any, Any, "ModelTurn"]
Complete = Callable[Concatenate[M, P], Turn]

_PROVIDER_KEY = "_hookgate_provider"


def traced_chat(provider: str) -> Callable[[Complete[M, P]], Complete[M, P]]:
    """Decorate ``complete`` of a client of ``provider`` (``gen_ai.provider.name``)."""

    def decorate(fn: Complete[M, P]) -> Complete[M, P]:
        def complete(model: M, /, *args: P.args, **kwargs: P.kwargs) -> Turn:
            if not SWITCH.on:
                return fn(model, *args, **kwargs)
            return _traced(provider, fn(model, *args, **kwargs), model)

        functools.update_wrapper(complete, fn)
        setattr(complete, _PROVIDER_KEY, provider)
        return complete

    return decorate


def provider_of(llm: object) -> str | None:
    """The provider a model client's traced ``complete`` declares (None if untraced)."""
    complete = getattr(type(llm), "complete", None)
    found = getattr(complete, _PROVIDER_KEY, None)
    return found if isinstance(found, str) else None


async def _traced(provider: str, body: Turn, model: Any) -> ModelTurn:
    from opentelemetry.trace import SpanKind, StatusCode

    request_model = values.name(getattr(model, "model", None) or provider)
    attrs: dict[str, Any] = {
        names.OPERATION_NAME: names.OP_CHAT,
        names.PROVIDER_NAME: provider,
        names.REQUEST_MODEL: request_model,
    }
    base_url = getattr(model, "base_url", None)
    if isinstance(base_url, str):
        parts = urlsplit(base_url)
        if parts.hostname:
            attrs[names.SERVER_ADDRESS] = parts.hostname
            attrs[names.SERVER_PORT] = parts.port or (443 if parts.scheme == "https" else 80)
    ins = instruments()
    metric_attrs = {k: attrs[k] for k in (names.OPERATION_NAME, names.PROVIDER_NAME,
                                          names.REQUEST_MODEL)}
    started = time.perf_counter()
    with ins.tracer.start_as_current_span(f"{names.OP_CHAT} {request_model}",
                                          kind=SpanKind.CLIENT, attributes=attrs,
                                          record_exception=True,
                                          set_status_on_exception=False) as span:
        try:
            turn = await body
        except Exception as exc:
            span.set_attribute(names.ERROR_TYPE, type(exc).__qualname__)
            span.set_status(StatusCode.ERROR, values.text(str(exc)))
            ins.client_duration.record(time.perf_counter() - started, {
                **metric_attrs, names.ERROR_TYPE: type(exc).__qualname__})
            raise
        info = turn.response
        if info is not None:
            if info.id:
                span.set_attribute(names.RESPONSE_ID, values.name(info.id))
            if info.model:
                span.set_attribute(names.RESPONSE_MODEL, values.name(info.model))
                metric_attrs[names.RESPONSE_MODEL] = values.name(info.model)
            if info.finish_reasons:
                span.set_attribute(names.RESPONSE_FINISH_REASONS,
                                   [values.name(r) for r in info.finish_reasons])
            for key, tokens, kind in ((names.USAGE_INPUT_TOKENS, info.input_tokens, "input"),
                                      (names.USAGE_OUTPUT_TOKENS, info.output_tokens,
                                       "output")):
                if tokens is not None:
                    span.set_attribute(key, tokens)
                    ins.client_tokens.record(tokens, {**metric_attrs, names.TOKEN_TYPE: kind})
    ins.client_duration.record(time.perf_counter() - started, metric_attrs)
    return turn
