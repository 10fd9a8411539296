"""API steps the portal tests take around the browser: start a run, wait for its request."""

from __future__ import annotations

import time
from typing import Any

import httpx

from tests.server.demo_world import auth

WAIT_S = 20


def start_run(c: httpx.Client, message: str = "pay ACME", user: str = "alice") -> str:
    r = c.post("/api/runs", json={"agent_id": "buyer", "message": message}, headers=auth(user))
    assert r.status_code == 200, r.text
    return r.json()["run_id"]  # type: ignore[no-any-return]


def pending_request(c: httpx.Client, user: str = "alice") -> dict[str, Any]:
    """The org's first pending request, once there is one."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        pending = c.get("/api/confirmations", params={"status": "pending"},
                        headers=auth(user)).json()
        if pending:
            return pending[0]  # type: ignore[no-any-return]
        time.sleep(0.05)
    raise AssertionError("no pending request appeared")


def run_status(c: httpx.Client, run_id: str, user: str = "alice") -> str:
    return str(c.get(f"/api/runs/{run_id}", headers=auth(user)).json()["status"])


def wait_finished(c: httpx.Client, run_id: str) -> str:
    """The run's final status, once it has one."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        status = run_status(c, run_id)
        if status not in ("running", "awaiting_approval"):
            return status
        time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not finish")
