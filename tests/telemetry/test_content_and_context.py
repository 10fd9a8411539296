"""What spans may carry and where the trace goes: arguments and results only when opted in
(masked, and never an output a hook withheld), trace context into command and HTTP hooks,
a resumed run in the trace it started in, and nothing at all with telemetry off."""

from __future__ import annotations

import json
import shlex
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan

from hookgate import Agent, ReActEngine, ScriptedLLM, tool
from hookgate.hooks import registry as hook_registry
from hookgate.telemetry.switch import SWITCH
from tests.telemetry.conftest import Otel

RAW = "RAW-OUTPUT-THE-MODEL-MUST-NOT-SEE"
OPT_IN = {"OTEL_SEMCONV_STABILITY_OPT_IN": "http,gen_ai_latest_experimental",
          "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "SPAN_ONLY"}


@tool
async def vault__read(name: str, api_token: str) -> str:
    """Read a secret document."""
    return RAW


@tool
async def echo(text: str) -> str:
    """Say the text back."""
    return f"echo: {text}"


def agent(hooks: dict[str, Any] | None = None) -> Agent:
    return Agent(id="clerk", name="Clerk", instructions="", tools=[vault__read, echo],
                 model_config_json={"hooks": hooks or {}})


def script(*calls: dict[str, Any]) -> ScriptedLLM:
    return ScriptedLLM([{"tool_calls": list(calls)}, {"answer": "done"}])


ECHO = {"name": "echo", "args": {"text": "hi"}, "id": "c_echo"}
VAULT = {"name": "vault__read", "args": {"name": "plan", "api_token": "tok-123"}, "id": "c_v"}
WITHHOLD = {"class_hooks": [{"name": "tests.hookfixtures:MisbehavingPost",
                             "params": {"how": "raise"}}]}


def every_value(spans: list[ReadableSpan]) -> str:
    return json.dumps([dict(s.attributes or {}) for s in spans], default=str)


async def test_arguments_and_results_stay_off_spans_unless_opted_in(otel: Otel) -> None:
    await ReActEngine(script(ECHO, VAULT)).run(agent(), "go")
    spans = otel.spans()
    assert otel.one("execute_tool echo")
    assert not any("gen_ai.tool.call.arguments" in (s.attributes or {}) for s in spans)
    assert "tok-123" not in every_value(spans) and RAW not in every_value(spans)


async def test_opted_in_arguments_are_masked_and_a_withheld_output_never_appears(
        otel: Otel, monkeypatch: pytest.MonkeyPatch) -> None:
    for k, v in OPT_IN.items():
        monkeypatch.setenv(k, v)
    await ReActEngine(script(ECHO)).run(agent(), "go")
    echo_span = otel.one("execute_tool echo")
    assert json.loads(echo_span.attributes["gen_ai.tool.call.arguments"]) == {"text": "hi"}
    assert echo_span.attributes["gen_ai.tool.call.result"] == "echo: hi"

    # A PostToolUse hook fails closed: the raw output is withheld from the model, and so
    # from the span.
    result = await ReActEngine(script(VAULT)).run(agent(WITHHOLD), "go")
    assert result.status == "completed"
    vault = otel.one("execute_tool vault__read")
    assert json.loads(vault.attributes["gen_ai.tool.call.arguments"]) == {
        "name": "plan", "api_token": "••••"}
    assert vault.attributes["hookgate.tool.outcome"] == "withheld"
    assert vault.attributes["error.type"] == "output_withheld"
    assert vault.attributes["gen_ai.tool.call.result"].startswith("Tool output withheld")
    everything = every_value(otel.spans())
    assert RAW not in everything and "tok-123" not in everything


async def test_the_semconv_opt_in_alone_captures_no_content(
        otel: Otel, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    monkeypatch.delenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", raising=False)
    await ReActEngine(script(ECHO)).run(agent(), "go")
    assert "gen_ai.tool.call.arguments" not in (otel.one("execute_tool echo").attributes or {})


async def test_capture_content_from_the_telemetry_section_also_masks_its_own_patterns(
        otel: Otel) -> None:
    SWITCH.capture_content, SWITCH.mask_patterns = True, ("plan",)
    call = {"name": "echo", "args": {"text": "x"}, "id": "c1"}
    await ReActEngine(script(call, {**VAULT, "args": {"name": "n", "api_token": "t"}})
                      ).run(agent(), "go")
    assert otel.one("execute_tool echo").attributes["gen_ai.tool.call.arguments"]
    args = json.loads(otel.one("execute_tool vault__read").attributes[
        "gen_ai.tool.call.arguments"])
    assert args == {"name": "n", "api_token": "••••"}


def traceparent_of(span: ReadableSpan) -> str:
    assert span.context is not None
    c = span.context
    return f"00-{c.trace_id:032x}-{c.span_id:016x}-{int(c.trace_flags):02x}"


async def test_a_command_hook_runs_with_its_hook_spans_traceparent(
        otel: Otel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACEPARENT", "00-" + "1" * 32 + "-" + "2" * 16 + "-01")  # stale
    seen = tmp_path / "traceparent.txt"
    hooks = {"command_hooks": [{"event": "PreToolUse", "name": "probe",
                                "command": f'printf %s "$TRACEPARENT" > {shlex.quote(str(seen))}'}]}
    result = await ReActEngine(script(ECHO)).run(agent(hooks), "go")
    assert result.status == "completed"
    assert seen.read_text() == traceparent_of(otel.one("hookgate.hook probe"))


@pytest.fixture
def header_server() -> Iterator[tuple[str, list[dict[str, str]]]]:
    seen: list[dict[str, str]] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            seen.append({k.lower(): v for k, v in self.headers.items()})
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/hook", seen
    finally:
        server.shutdown()
        server.server_close()


async def test_an_http_hook_gets_the_traceparent_header_of_its_hook_span(
        otel: Otel, header_server: tuple[str, list[dict[str, str]]]) -> None:
    url, seen = header_server
    hooks = {"http_hooks": [{"event": "PreToolUse", "name": "remote_policy", "url": url,
                             "headers": {"X-Team": "payments"}}]}
    result = await ReActEngine(script(ECHO)).run(agent(hooks), "go")
    assert result.status == "completed"
    (headers,) = seen
    assert headers["traceparent"] == traceparent_of(otel.one("hookgate.hook remote_policy"))
    assert headers["x-team"] == "payments"


async def test_a_resumed_run_goes_on_in_the_trace_it_started_in(otel: Otel) -> None:
    engine = ReActEngine(script(ECHO))
    first = await engine.run(agent(), "go")
    original = otel.one("invoke_agent Clerk")
    remembered = first.state.extra["otel_traceparent"]
    assert remembered == traceparent_of(original)

    # The same run, picked up by a fresh process after a restart (no span is current).
    state = engine.new_state(agent(), "go again")
    state.extra["otel_traceparent"] = remembered
    otel.spans_exporter.clear()
    await ReActEngine(script(ECHO)).execute(agent(), state)
    resumed = otel.one("invoke_agent Clerk")
    assert resumed.context is not None and original.context is not None
    assert resumed.context.trace_id == original.context.trace_id
    assert resumed.parent is not None and resumed.parent.span_id == original.context.span_id


async def test_with_telemetry_off_nothing_is_traced_or_propagated(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TRACEPARENT", raising=False)
    seen = tmp_path / "env.txt"
    hooks = {"command_hooks": [{"event": "PreToolUse", "name": "probe",
                                "command": f'printf %s "$TRACEPARENT" > {shlex.quote(str(seen))}'}]}
    result = await ReActEngine(script(ECHO)).run(agent(hooks), "go")
    assert result.status == "completed"
    assert SWITCH.on is False and hook_registry.instrument is None
    assert seen.read_text() == ""
    assert "otel_traceparent" not in result.state.extra
