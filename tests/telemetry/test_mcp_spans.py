"""MCP spans in the OpenTelemetry MCP conventions, through a real hookgate server: a client's
``tools/call`` continues the client's trace (``params._meta``) in a SERVER span, hookgate's
``execute_tool`` span sits inside it, and each downstream request is a CLIENT span inside
that, whose context reaches an HTTP downstream server as header and ``_meta`` alike."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, format_span_id, format_trace_id

from hookgate.config import load_config
from hookgate.runtime.deployment import deployment_from_config
from tests.live_server import free_port, live_server
from tests.mcp_gateway.world import TOKENS, http_client, text
from tests.telemetry.conftest import Otel

ROOT = Path(__file__).resolve().parents[2]

CONFIG = """\
database: {database}
orgs: [{{id: acme, name: ACME}}]
users: [{{id: alice, org: acme, token: {token}}}]
models: {{idle: {{type: scripted, turns: [{{answer: nothing to do}}]}}}}
mcp_servers:
  - {{id: traced, url: "http://127.0.0.1:{port}/mcp"}}
  - {{id: time, command: {python}, args: [-m, mcp_server_time, --local-timezone, UTC]}}
agents:
  - id: coder
    org: acme
    owner: alice
    model: idle
    mcp: {{servers: [traced, time]}}
    model_config_json: {{hooks: {{class_hooks: [audit_log]}}}}
"""


@pytest.fixture
def downstream(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    port, log = free_port(), tmp_path / "traced.log"
    env = {**os.environ, "TRACED_LOG": str(log),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.Popen([sys.executable, "-m", "tests.telemetry.traced_mcp_server",
                             str(port)], env=env, cwd=ROOT)
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, "the downstream MCP server exited"
                assert time.monotonic() < deadline, "the downstream MCP server did not start"
                time.sleep(0.1)
        yield port, log
    finally:
        proc.terminate()
        proc.wait(10)


def child(otel: Otel, parent: ReadableSpan, name: str) -> ReadableSpan:
    found = [s for s in otel.children(parent) if s.name == name]
    assert len(found) == 1, (name, [s.name for s in otel.children(parent)])
    return found[0]


async def test_served_and_downstream_calls_are_mcp_spans_in_one_trace(
        otel: Otel, tmp_path: Path, database_url: str,
        downstream: tuple[int, Path]) -> None:
    port, log = downstream
    path = tmp_path / "hookgate.yaml"
    path.write_text(CONFIG.format(database=database_url, token=TOKENS["alice"], port=port,
                                  python=sys.executable))
    caller = trace.get_tracer("test-client")
    with live_server(deployment_from_config(load_config(path))) as server:
        with caller.start_as_current_span("client work") as root:
            async with http_client(f"{server.url}/mcp/coder", "alice") as client:
                echoed = await client.call_tool("mcp__traced__echo", {"text": "hi"})
                timed = await client.call_tool("mcp__time__get_current_time",
                                               {"timezone": "UTC"})
                failed = await client.call_tool("mcp__traced__fails", {})
        # A client of the session era (protocol before 2026-07-28) has an MCP session.
        async with http_client(f"{server.url}/mcp/coder", "alice", mode="legacy") as client:
            await client.call_tool("mcp__time__get_current_time", {"timezone": "UTC"})
    assert text(echoed) == "hi" and not timed.is_error and failed.is_error
    trace_id = root.get_span_context().trace_id

    # Served side: the SDK's SERVER span, in the client's trace (it came in params._meta),
    # with hookgate's attributes on it.
    served = otel.one("tools/call mcp__traced__echo")
    assert served.kind is SpanKind.SERVER and served.context is not None
    assert served.context.trace_id == trace_id
    attrs = dict(served.attributes or {})
    assert attrs["mcp.method.name"] == "tools/call"
    assert attrs["gen_ai.tool.name"] == "mcp__traced__echo"
    assert attrs["gen_ai.operation.name"] == "execute_tool"
    assert attrs["network.transport"] == "tcp" and attrs["network.protocol.name"] == "http"
    assert attrs["client.address"] == "127.0.0.1"
    # The current protocol era has no sessions: no mcp.session.id (the conventions ask for
    # it only when the request is part of a session).
    assert attrs["mcp.protocol.version"] and "mcp.session.id" not in attrs
    assert "jsonrpc.request.id" in attrs

    # hookgate's execute_tool span inside it, the downstream CLIENT span inside that.
    execute = child(otel, served, "execute_tool mcp__traced__echo")
    out = child(otel, execute, "tools/call echo")
    assert out.kind is SpanKind.CLIENT and out.context is not None
    out_attrs = dict(out.attributes or {})
    assert out_attrs["mcp.method.name"] == "tools/call"
    assert out_attrs["gen_ai.tool.name"] == "echo"
    assert out_attrs["gen_ai.operation.name"] == "execute_tool"
    assert out_attrs["server.address"] == "127.0.0.1" and out_attrs["server.port"] == port
    assert out_attrs["network.transport"] == "tcp"
    assert out_attrs["mcp.protocol.version"]
    assert out.status.is_ok or out.status.status_code.name == "UNSET"

    # The downstream server got the context in _meta and as the HTTP header: same value,
    # the caller's trace, and a span inside hookgate's CLIENT span.
    got = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(got) == 2  # echo, then fails
    assert got[0]["header"] == got[0]["meta"]
    _, got_trace, got_span, _ = got[0]["meta"].split("-")
    assert got_trace == format_trace_id(trace_id)
    inside = {format_span_id(s.context.span_id) for s in [out, *otel.children(out)]
              if s.context is not None}
    assert got_span in inside

    # A stdio downstream server: the same CLIENT span, over a pipe.
    modern, legacy = sorted(otel.named("tools/call mcp__time__get_current_time"),
                            key=lambda s: s.start_time or 0)
    stdio = child(otel, child(otel, modern, "execute_tool mcp__time__get_current_time"),
                  "tools/call get_current_time")
    assert stdio.kind is SpanKind.CLIENT
    assert dict(stdio.attributes or {})["network.transport"] == "pipe"
    legacy_attrs = dict(legacy.attributes or {})
    assert legacy_attrs["mcp.session.id"]
    assert legacy_attrs["mcp.protocol.version"] < "2026-07-28"

    # A downstream tool that reports an error: its CLIENT span says so.
    broken = otel.one("tools/call fails")
    assert dict(broken.attributes or {})["error.type"] == "tool_error"
    assert broken.status.status_code.name == "ERROR"
    assert dict(otel.one("tools/call mcp__traced__fails").attributes or {})[
        "error.type"] == "tool_error"

    # The conventions' duration metrics, with their low-cardinality attributes.
    served: dict[tuple[str, str | None], list[str]] = {}
    for p in otel.points("mcp.server.operation.duration"):
        if p.attributes.get("mcp.method.name") == "tools/call":
            key = (p.attributes["gen_ai.tool.name"], p.attributes.get("error.type"))
            served.setdefault(key, []).extend(
                [p.attributes["mcp.protocol.version"]] * p.count)
    modern_version = attrs["mcp.protocol.version"]
    assert served[("mcp__traced__echo", None)] == [modern_version]
    assert sorted(served[("mcp__time__get_current_time", None)]) == sorted(
        [modern_version, legacy_attrs["mcp.protocol.version"]])  # the two clients
    assert served[("mcp__traced__fails", "tool_error")] == [modern_version]
    client_points = {(p.attributes.get("gen_ai.tool.name"), p.attributes.get("error.type")):
                     p for p in otel.points("mcp.client.operation.duration")}
    assert client_points[("echo", None)].count == 1
    assert client_points[("fails", "tool_error")].count == 1
    assert client_points[("get_current_time", None)].attributes["network.transport"] == "pipe"
    assert "mcp.session.id" not in client_points[("echo", None)].attributes
