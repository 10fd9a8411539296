"""On PostgreSQL a run is a queue job that any worker may execute: the run started on an API
instance (``--no-worker``) with a caller's ``traceparent`` is executed by another ``hookgate
serve`` process, and its spans still arrive at the collector in the caller's trace."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.instances import Instance
from tests.server.test_restart import wait_for
from tests.telemetry.collector import collector
from tests.telemetry.test_server_otlp import CALLER_SPAN, CALLER_TRACE, CONFIG, TOKEN

H = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture
def pg_url(postgres_server_url: str) -> str:
    from tests.conftest import _fresh_pg_database

    return _fresh_pg_database(postgres_server_url)


@pytest.fixture
def instances() -> Iterator[list[Instance]]:
    started: list[Instance] = []
    yield started
    for inst in started:
        inst.stop()


def test_a_queued_run_continues_the_callers_trace_on_another_worker(
        tmp_path: Path, pg_url: str, instances: list[Instance]) -> None:
    config = tmp_path / "hookgate.yaml"
    # The same deployment as the single-server test, on PostgreSQL.
    config.write_text(CONFIG.format(db="x", token=TOKEN).replace(
        "database: sqlite+aiosqlite:///x", f"database: {pg_url}"))
    ledger = tmp_path / "ledger.txt"
    with collector() as got:
        env = {"HOOKGATE_TEST_LEDGER": str(ledger), "OTEL_EXPORTER_OTLP_ENDPOINT": got.url,
               "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_METRIC_EXPORT_INTERVAL": "300",
               "OTEL_SDK_DISABLED": "false"}
        api = Instance("api", config, tmp_path, args=("--no-worker",), env=env)
        worker = Instance("worker", config, tmp_path, env=env)
        for inst in (api, worker):
            instances.append(inst)
            inst.spawn()
        for inst in (api, worker):
            inst.wait_up()
        r = httpx.post(api.url + "/api/runs", json={"agent_id": "buyer", "message": "pay"},
                       headers={**H, "traceparent": f"00-{CALLER_TRACE}-{CALLER_SPAN}-01"},
                       timeout=10)
        assert r.status_code == 200, r.text
        run_id = r.json()["run_id"]
        wait_for(lambda: httpx.get(f"{api.url}/api/runs/{run_id}", headers=H, timeout=10)
                 .json()["status"] == "completed", "the run to complete", 60)
        (run,) = wait_for(lambda: got.named("invoke_agent"), "the run's span", 30)
        wait_for(lambda: got.named("execute_tool"), "the tool's span", 30)

    # The worker executed it (the API instance runs nothing), in the caller's trace.
    assert run.attributes["hookgate.run.id"] == run_id
    assert run.trace_id == CALLER_TRACE and run.parent_span_id == CALLER_SPAN
    (tool,) = got.named("execute_tool oa__purchase_pay")
    assert tool.trace_id == CALLER_TRACE and tool.parent_span_id == run.span_id
    assert {s.trace_id for s in got.scoped("hookgate")} == {CALLER_TRACE}
    assert ledger.read_text() == "100 ACME\n"
