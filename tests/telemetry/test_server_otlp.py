"""A real ``hookgate serve`` with OTLP export on: a run started by a caller inside a trace
arrives at a loopback collector as spans of that same trace, with metrics beside them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx

from tests.live_server import free_port
from tests.server.test_restart import wait_for
from tests.telemetry.collector import Collector, collector

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "otel-token-alice"
H = {"Authorization": f"Bearer {TOKEN}"}
CALLER_TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER_SPAN = "00f067aa0ba902b7"

CONFIG = """
database: sqlite+aiosqlite:///{db}
orgs: [{{id: acme, name: ACME}}]
users:
  - {{id: alice, org: acme, admin: true, token: {token}}}
tools: [tests.restart_tools:oa__purchase_pay]
models:
  script:
    type: scripted
    turns:
      - tool_calls: [{{name: oa__purchase_pay, args: {{amount: 100, vendor: ACME}}, id: pay1}}]
      - answer: paid
agents:
  - id: buyer
    name: Buyer
    org: acme
    owner: alice
    model: script
    tools: [oa__purchase_pay]
    model_config_json:
      hooks:
        class_hooks: [audit_log]
telemetry:
  service_name: hookgate-under-test
"""


def serve(tmp_path: Path, got: Collector) -> tuple[subprocess.Popen[bytes], str]:
    config = tmp_path / "hookgate.yaml"
    config.write_text(CONFIG.format(db=tmp_path / "hookgate.db", token=TOKEN))
    port = free_port()
    env = {**os.environ, "HOOKGATE_TEST_LEDGER": str(tmp_path / "ledger.txt"),
           "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "OTEL_EXPORTER_OTLP_ENDPOINT": got.url,
           "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_METRIC_EXPORT_INTERVAL": "300"}
    env.pop("OTEL_SDK_DISABLED", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "hookgate.cli.main", "serve", "--config", str(config),
         "--port", str(port), "--log-level", "warning"],
        env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"

    def up() -> bool:
        if proc.poll() is not None:
            err = proc.stderr.read().decode() if proc.stderr else ""
            raise AssertionError(f"hookgate serve exited: {err}")
        try:
            return httpx.get(url + "/", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(up, "hookgate serve to come up", 60)
    return proc, url


def test_a_served_run_reaches_the_collector_in_the_callers_trace(tmp_path: Path) -> None:
    with collector() as got:
        proc, url = serve(tmp_path, got)
        try:
            r = httpx.post(url + "/api/runs", json={"agent_id": "buyer", "message": "pay"},
                           headers={**H, "traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
                           timeout=10)
            assert r.status_code == 200, r.text
            run_id = r.json()["run_id"]
            wait_for(lambda: httpx.get(f"{url}/api/runs/{run_id}", headers=H, timeout=10)
                     .json()["status"] == "completed", "the run to complete")
            (run,) = wait_for(lambda: got.named("invoke_agent"), "the run's span")
            wait_for(lambda: got.named("hookgate.hook audit_log"), "the hook's span")
            wait_for(lambda: "hookgate.tool.calls" in got.metric_names, "the call counter")
        finally:
            proc.terminate()
            proc.wait(30)

    assert run.name == "invoke_agent Buyer" and run.service_name == "hookgate-under-test"
    assert run.trace_id == CALLER_TRACE and run.parent_span_id == CALLER_SPAN
    assert run.attributes["hookgate.run.id"] == run_id
    (tool,) = got.named("execute_tool oa__purchase_pay")
    assert tool.trace_id == CALLER_TRACE and tool.parent_span_id == run.span_id
    assert tool.attributes["hookgate.tool.outcome"] == "ok"
    (hook,) = got.named("hookgate.hook audit_log")
    assert hook.parent_span_id == tool.span_id
    # Every span hookgate made belongs to the caller's trace (FastAPI's own request spans,
    # of the polling requests too, come under their own scope).
    ours = got.scoped("hookgate")
    assert {s.name for s in ours} >= {"invoke_agent Buyer", "execute_tool oa__purchase_pay",
                                      "hookgate.hook audit_log", "chat hookgate.scripted"}
    assert {s.trace_id for s in ours} == {CALLER_TRACE}
    assert got.content_types == {"application/x-protobuf"}
    assert (tmp_path / "ledger.txt").read_text() == "100 ACME\n"
