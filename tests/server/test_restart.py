"""Restart survival with a real `hookgate serve` subprocess killed with SIGKILL."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from hookgate.approvals.eligibility import Approver
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.storage.database import Database
from tests.live_server import free_port
from tests.loopback_http import HTTP
from tests.polling import wait_for

pytestmark = pytest.mark.both_databases

ROOT = Path(__file__).resolve().parents[2]
TOKEN = "restart-token-alice"

CONFIG = """
database: {database}
orgs: [{{id: acme, name: ACME}}]
users:
  - {{id: alice, org: acme, admin: true, token: {token}}}
tools: [tests.restart_tools:oa__purchase_pay]
models:
  script:
    type: scripted
    turns:
      - tool_calls: [{{name: oa__purchase_pay, args: {{amount: 60000, vendor: ACME}}, id: pay1}}]
      - answer: paid
agents:
  - id: buyer
    name: Buyer
    org: acme
    owner: alice
    model: script
    tools: [oa__purchase_pay]
    confirmation_mode: inline_only
"""


class Serve:
    def __init__(self, config: Path, ledger: Path) -> None:
        self.config = config
        self.ledger = ledger
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "HOOKGATE_TEST_LEDGER": str(self.ledger),
               "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "hookgate.cli.main", "serve", "--config", str(self.config),
             "--port", str(self.port), "--log-level", "warning"],
            env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                raise AssertionError(f"hookgate serve exited: {err}")
            try:
                if HTTP.get(self.url + "/", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError("hookgate serve did not come up")

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(30)

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()


@pytest.fixture
def serve(tmp_path: Path, database_url: str) -> Iterator[Serve]:
    config = tmp_path / "hookgate.yaml"
    config.write_text(CONFIG.format(database=database_url, token=TOKEN))
    s = Serve(config, tmp_path / "ledger.txt")
    yield s
    s.stop()


H = {"Authorization": f"Bearer {TOKEN}"}


def pending(url: str) -> list[dict[str, Any]]:
    r = HTTP.get(url + "/api/confirmations?status=pending", headers=H, timeout=10)
    return r.json() if r.status_code == 200 else []  # type: ignore[no-any-return]


def run_status(url: str, run_id: str) -> str:
    return str(HTTP.get(f"{url}/api/runs/{run_id}", headers=H, timeout=10).json()["status"])


def parked(database_url: str, url: str, run_id: str) -> bool:
    """The run waits for a person and nothing holds it any more. On PostgreSQL a queued job
    advances the run; it checkpoints the run as waiting a moment before it returns, and a
    kill in that moment leaves the job to the stalled-job retry, tens of seconds later
    (waiting on the status alone, the test killed it in that moment once its polls were
    quick)."""
    if run_status(url, run_id) != "awaiting_approval":
        return False
    if not database_url.startswith("postgresql"):
        return True
    dsn = database_url.replace("postgresql+asyncpg://", "postgresql://")
    with psycopg.connect(dsn, autocommit=True) as conn:
        held = conn.execute("SELECT count(*) FROM procrastinate_jobs WHERE lock = %s AND "
                            "status IN ('todo', 'doing')", (run_id,)).fetchone()
    return held is not None and held[0] == 0


def payments(ledger: Path) -> list[str]:
    return ledger.read_text().splitlines() if ledger.exists() else []


def test_run_waiting_for_approval_survives_sigkill_and_pays_once(serve: Serve,
                                                                database_url: str) -> None:
    serve.start()
    run_id = HTTP.post(serve.url + "/api/runs", json={"agent_id": "buyer", "message": "pay"},
                       headers=H, timeout=10).json()["run_id"]
    [request] = wait_for(lambda: pending(serve.url), "the pending request")
    # Killed once it waits (a kill in the moment before it parks leaves the run to the
    # stalled-job retry, tens of seconds later: tests/server/test_instances.py).
    wait_for(lambda: parked(database_url, serve.url, run_id), "the run to wait")
    serve.kill()
    assert payments(serve.ledger) == []

    serve.start()
    wait_for(lambda: run_status(serve.url, run_id) == "awaiting_approval",
             "the resumed run to wait for approval again")
    r = HTTP.post(f"{serve.url}/api/confirmations/{request['id']}/respond",
                  json={"decision": "approve"}, headers=H, timeout=10)
    assert r.status_code == 200, r.text
    wait_for(lambda: run_status(serve.url, run_id) == "completed", "the run to complete")
    assert payments(serve.ledger) == ["60000 ACME"]
    run = HTTP.get(f"{serve.url}/api/runs/{run_id}", headers=H, timeout=10).json()
    assert run["answer"] == "paid"
    assert [e["type"] for e in run["trace"]].count("tool_result") == 1

    # A further restart does not run anything again.
    serve.kill()
    serve.start()
    time.sleep(1)
    assert payments(serve.ledger) == ["60000 ACME"]


def test_decision_written_while_the_server_was_down_is_honoured(
        serve: Serve, database_url: str) -> None:
    serve.start()
    run_id = HTTP.post(serve.url + "/api/runs", json={"agent_id": "buyer", "message": "pay"},
                       headers=H, timeout=10).json()["run_id"]
    [request] = wait_for(lambda: pending(serve.url), "the pending request")
    # Killed once it waits (a kill in the moment before it parks leaves the run to the
    # stalled-job retry, tens of seconds later: tests/server/test_instances.py).
    wait_for(lambda: parked(database_url, serve.url, run_id), "the run to wait")
    serve.kill()

    async def decide_offline() -> None:
        db = Database(database_url)
        try:
            await PersistentApprovals(db).decide(request["id"], "approve",
                                                 Approver("alice", "acme"))
        finally:
            await db.dispose()

    asyncio.run(decide_offline())
    serve.start()
    wait_for(lambda: run_status(serve.url, run_id) == "completed", "the run to complete")
    assert payments(serve.ledger) == ["60000 ACME"]
