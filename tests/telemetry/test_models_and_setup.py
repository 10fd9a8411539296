"""Model-call spans against a real chat-completions endpoint on loopback, the attribute names
against the installed semantic-conventions package, and the ``telemetry:`` section."""

from __future__ import annotations

import pytest
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as gen_ai
from opentelemetry.semconv._incubating.metrics import gen_ai_metrics
from opentelemetry.semconv.attributes import error_attributes, server_attributes
from opentelemetry.trace import SpanKind, StatusCode

from hookgate import ReActEngine
from hookgate.config import ConfigError, parse_config
from hookgate.llm.openai_compat import OpenAICompatibleModel
from hookgate.telemetry import names
from hookgate.telemetry.setup import TelemetrySettings, install, wanted
from hookgate.telemetry.switch import SWITCH
from tests.fakes.chat_completions import FakeChatCompletions, closed_port_url, tool_then_answer
from tests.llm.test_openai_model import KEY, MODEL, shop_agent
from tests.telemetry.conftest import Otel, reset_globals


def test_gen_ai_names_are_the_semantic_conventions_names() -> None:
    ours = {k: v for k, v in vars(names).items() if isinstance(v, str)
            and v.startswith("gen_ai.") and not k.startswith("M_")}
    theirs = {v for k, v in vars(gen_ai).items() if k.startswith("GEN_AI_")}
    assert set(ours.values()) <= theirs, set(ours.values()) - theirs
    assert names.ERROR_TYPE == error_attributes.ERROR_TYPE
    assert names.SERVER_ADDRESS == server_attributes.SERVER_ADDRESS
    assert names.SERVER_PORT == server_attributes.SERVER_PORT
    ops = {o.value for o in gen_ai.GenAiOperationNameValues}
    assert {names.OP_CHAT, names.OP_EXECUTE_TOOL, names.OP_INVOKE_AGENT,
            names.OP_INVOKE_WORKFLOW} <= ops
    assert names.M_CLIENT_DURATION == gen_ai_metrics.GEN_AI_CLIENT_OPERATION_DURATION
    assert names.M_CLIENT_TOKENS == gen_ai_metrics.GEN_AI_CLIENT_TOKEN_USAGE


async def test_each_model_call_is_a_chat_client_span_with_usage_and_the_trace_header(
        otel: Otel) -> None:
    with FakeChatCompletions(KEY, MODEL, tool_then_answer("price_of", {"item": "pen"})) as fake:
        engine = ReActEngine(llm=OpenAICompatibleModel(fake.base_url, KEY, MODEL))
        result = await engine.run(shop_agent(), "How much is a pen?", user_id="alice")
    assert result.status == "completed"

    first, second = sorted(otel.named(f"chat {MODEL}"), key=lambda s: s.start_time or 0)
    assert first.kind is SpanKind.CLIENT
    a = dict(first.attributes or {})
    assert a["gen_ai.operation.name"] == "chat" and a["gen_ai.provider.name"] == "openai"
    assert a["gen_ai.request.model"] == MODEL and a["gen_ai.response.model"] == MODEL
    assert a["gen_ai.response.id"] == "chatcmpl-1"
    assert a["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert a["gen_ai.usage.input_tokens"] == 1 and a["gen_ai.usage.output_tokens"] == 1
    assert a["server.address"] == "127.0.0.1" and a["server.port"] == fake.port
    assert dict(second.attributes or {})["gen_ai.response.finish_reasons"] == ("stop",)
    root = otel.one("invoke_agent Shop")
    assert root.attributes["gen_ai.provider.name"] == "openai"
    # The endpoint is told which model-call span asked (W3C traceparent).
    assert first.context is not None
    sent = fake.requests[0].headers["traceparent"]
    assert sent.split("-")[1:3] == [f"{first.context.trace_id:032x}",
                                    f"{first.context.span_id:016x}"]
    tokens = otel.points("gen_ai.client.token.usage")
    assert sorted(p.attributes["gen_ai.token.type"] for p in tokens) == ["input", "output"]
    assert sum(p.count for p in otel.points("gen_ai.client.operation.duration")) == 2


async def test_an_endpoint_that_is_down_ends_the_chat_span_in_error(otel: Otel) -> None:
    engine = ReActEngine(llm=OpenAICompatibleModel(closed_port_url(), KEY, MODEL,
                                                   max_retries=0))
    result = await engine.run(shop_agent(), "hi", user_id="alice")
    assert result.status == "failed"
    chat = otel.one(f"chat {MODEL}")
    assert chat.status.status_code is StatusCode.ERROR
    assert chat.attributes["error.type"] == "ModelError"
    run = otel.one("invoke_agent Shop")
    assert run.attributes["error.type"] == "failed"
    assert run.status.status_code is StatusCode.ERROR


def test_the_telemetry_section_is_optional_and_checked() -> None:
    cfg = parse_config("agents: []\n")
    assert cfg.telemetry.settings() == TelemetrySettings()
    cfg = parse_config("telemetry: {enabled: true, service_name: shop, capture_content: true,"
                       " mask_patterns: [iban]}\n")
    assert cfg.telemetry.settings() == TelemetrySettings(True, "shop", None, True, ("iban",))
    with pytest.raises(ConfigError, match="did you mean 'endpoint'"):
        parse_config("telemetry: {endpont: http://127.0.0.1:4318}\n")


def test_telemetry_is_wanted_only_when_asked_for(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "OTEL_TRACES_EXPORTER",
                "OTEL_METRICS_EXPORTER", "OTEL_SDK_DISABLED"):
        monkeypatch.delenv(var, raising=False)
    assert not wanted(TelemetrySettings())
    assert wanted(TelemetrySettings(enabled=True))
    assert wanted(TelemetrySettings(endpoint="http://127.0.0.1:4318"))
    monkeypatch.setenv("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318")
    assert wanted(TelemetrySettings()) and not wanted(TelemetrySettings(enabled=False))
    monkeypatch.setenv("OTEL_SDK_DISABLED", "true")
    assert not wanted(TelemetrySettings(enabled=True))


def test_install_sets_up_the_sdk_once_and_reports_to_a_provider_already_there(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from opentelemetry import trace

    monkeypatch.setenv("OTEL_TRACES_EXPORTER", "none")
    monkeypatch.setenv("OTEL_METRICS_EXPORTER", "none")
    reset_globals()
    try:
        assert install(TelemetrySettings(enabled=True, service_name="shop",
                                         mask_patterns=("iban",)))
        provider = trace.get_tracer_provider()
        assert provider.resource.attributes["service.name"] == "shop"  # type: ignore[attr-defined]
        assert SWITCH.on and SWITCH.mask_patterns == ("iban",)
        # A second install (or opentelemetry-instrument's provider) is reported to as it is.
        assert install(TelemetrySettings(enabled=True, service_name="other"))
        assert trace.get_tracer_provider() is provider
    finally:
        reset_globals()

