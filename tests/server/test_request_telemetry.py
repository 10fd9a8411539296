"""FastAPI's request telemetry in a server process (server/app.py settle_request_telemetry):
`hookgate serve`'s app answers once, after its start, whether FastAPI records requests;
with no OpenTelemetry provider installed a request no longer looks the providers up, with
one installed before the start FastAPI records every request as before, and an app made
for a test or embedded in another program keeps FastAPI's own check on every request."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SERVE_THEN_REPORT = textwrap.dedent("""
    import asyncio, json, sys
    import httpx
    from hookgate.app import build_server
    from hookgate.server.serving import listen
    from tests.server.demo_world import world

    how, provider = sys.argv[2], sys.argv[3] == "provider"
    spans = None
    if provider:  # installed before the server starts, as telemetry: or opentelemetry-instrument do
        from opentelemetry import trace
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import (
            InMemorySpanExporter)
        spans = InMemorySpanExporter()
        tracer_provider = TracerProvider()
        tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
        trace.set_tracer_provider(tracer_provider)

    async def main():
        deployment, _ = world(sys.argv[1])
        if how == "serve":
            server, _ = build_server(deployment, "127.0.0.1", 0)
        else:  # an app as the tests make one
            import uvicorn
            from hookgate.app import create_app
            from hookgate.runtime.runtime import Runtime
            from hookgate.server.serving import uvicorn_config
            server = uvicorn.Server(uvicorn_config(create_app(Runtime(deployment)),
                                                   "127.0.0.1", 0))
        sock = listen("127.0.0.1", 0)
        port = sock.getsockname()[1]
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.02)
        native = server.config.app._native_telemetry
        fastapis_own = getattr(native.enabled, "__self__", None) is native
        # A settled answer asks no provider: make any look-up fail.
        from opentelemetry import trace

        def looked_up():
            raise AssertionError("a provider was looked up")

        real, trace.get_tracer_provider = trace.get_tracer_provider, looked_up
        try:
            answer = native.enabled() if not fastapis_own else None
        finally:
            trace.get_tracer_provider = real
        async with httpx.AsyncClient() as client:
            status = (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code
        server.should_exit = True
        await task
        recorded = [] if spans is None else [
            (s.name, s.attributes.get("http.route")) for s in spans.get_finished_spans()]
        print(json.dumps({"fastapis_own": fastapis_own, "answer": answer,
                          "enabled": native.enabled(), "status": status,
                          "recorded": recorded}))

    asyncio.run(main())
""")


def _run(tmp_path: Path, how: str, provider: str) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", SERVE_THEN_REPORT, f"sqlite+aiosqlite:///{tmp_path / 'h.db'}",
         how, provider], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    seen: dict[str, object] = json.loads(out.stdout.strip().splitlines()[-1])
    return seen


def test_serve_settles_that_no_request_is_recorded_and_asks_no_provider(tmp_path: Path
                                                                        ) -> None:
    seen = _run(tmp_path, "serve", "none")
    assert seen == {"fastapis_own": False, "answer": False, "enabled": False, "status": 200,
                    "recorded": []}


@pytest.mark.parametrize("how", ["serve", "embedded"])
def test_with_a_provider_installed_before_the_start_fastapi_records_each_request(
        tmp_path: Path, how: str) -> None:
    seen = _run(tmp_path, how, "provider")
    assert seen["fastapis_own"] is True and seen["enabled"] is True
    assert seen["status"] == 200
    assert ["GET /healthz", "/healthz"] in seen["recorded"]


def test_an_embedded_app_keeps_fastapis_check_on_every_request(tmp_path: Path) -> None:
    seen = _run(tmp_path, "embedded", "none")
    assert seen["fastapis_own"] is True and seen["enabled"] is False
    assert seen["status"] == 200 and seen["recorded"] == []
