"""A run driven over a real server's HTTP routes, for tests: started and waited for at its
approval gate (`parked`), or waited for to its end (`ended`)."""

from __future__ import annotations

import time
from typing import Any

import httpx

#: The statuses of a run that has not ended.
GOING = ("pending", "running", "awaiting_approval")


def parked(api: httpx.Client, agent: str, message: str, timeout: float = 30
           ) -> tuple[str, dict[str, Any]]:
    """A new run of ``agent`` waiting at its gate: its id and its pending request."""
    run_id = api.post("/api/runs", json={"agent_id": agent, "message": message}
                      ).raise_for_status().json()["run_id"]
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for request in api.get("/api/confirmations", params={"status": "pending"}
                               ).raise_for_status().json():
            if request["run_id"] == run_id:
                return run_id, request
        time.sleep(0.02)
    raise AssertionError(f"run {run_id} never asked for approval")


def ended(api: httpx.Client, run_id: str, timeout: float = 30) -> dict[str, Any]:
    """Run ``run_id`` as the server reads it once it has ended."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run: dict[str, Any] = api.get(f"/api/runs/{run_id}").raise_for_status().json()
        if run["status"] not in GOING:
            return run
        time.sleep(0.02)
    raise AssertionError(f"run {run_id} did not end")
