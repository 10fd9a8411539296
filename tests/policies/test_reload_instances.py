"""Two `hookgate serve` instances on one PostgreSQL serve the same policy folder: a change
to it is in force on both within seconds, each decision naming the new version."""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import _fresh_pg_database
from tests.instances import Instance
from tests.policies.world import INVARIANTS, write_policies

CONFIG = """\
database: {db}
orgs: [{{id: acme, read_only: false}}]
users: [{{id: alice, org: acme, admin: true, token: tok-alice}}]
tools: [tests.policies.world:oa__purchase_pay]
models:
  script: {{type: scripted, turns: [{{tool_calls: [{{name: oa__purchase_pay,
           args: {{amount: 100, vendor: ACME}}}}]}}, {{answer: done}}]}}
agents:
  - id: buyer
    org: acme
    owner: alice
    model: script
    tools: [oa__purchase_pay]
    model_config_json: {{hooks: {{class_hooks: [audit_log]}}}}
policies:
  - {{org: acme, path: policies, default: deny}}
"""

NO_PAYMENTS = INVARIANTS + """
@id("payments-frozen")
@reason("payments are frozen")
forbid(principal, action == Action::"oa__purchase_pay", resource);
"""


def paid_once(instance: Instance) -> dict[str, Any]:
    """Run the agent on ``instance``; its one tool event."""
    with httpx.Client(base_url=instance.url, timeout=10,
                      headers={"Authorization": "Bearer tok-alice"}) as c:
        started = c.post("/api/runs", json={"agent_id": "buyer", "message": "pay"})
        assert started.status_code == 200, started.text
        run_id = started.json()["run_id"]
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            body = c.get(f"/api/runs/{run_id}").json()
            if body["status"] not in ("running", "queued", "awaiting_approval"):
                (event,) = [e for e in body["trace"]
                            if e["type"] in ("tool_result", "tool_blocked")]
                return dict(event)
            time.sleep(0.05)
    raise AssertionError(f"run {run_id} did not finish on {instance.name}")


def blocked_within_seconds(instance: Instance) -> dict[str, Any]:
    """Run the agent on ``instance`` until its call is blocked (each instance looks at the
    files at most once a second); that run's tool event."""
    deadline = time.monotonic() + 10
    while True:
        event = paid_once(instance)
        if event["status"] == "blocked" or time.monotonic() > deadline:
            return event


def test_a_policy_change_is_in_force_on_both_instances_within_seconds(
        tmp_path: Path, request: pytest.FixtureRequest) -> None:
    folder = write_policies(tmp_path / "policies", INVARIANTS)
    config = tmp_path / "hookgate.yaml"
    db = _fresh_pg_database(request.getfixturevalue("postgres_server_url"))
    config.write_text(CONFIG.format(db=db), encoding="utf-8")
    first, second = Instance("a", config, tmp_path), Instance("b", config, tmp_path)
    try:
        first.spawn()
        first.wait_up()  # the schema is migrated once, by the first
        second.spawn()
        second.wait_up()
        before = [paid_once(first), paid_once(second)]
        assert [e["status"] for e in before] == ["ok", "ok"]

        policy_file = folder / "invariants.cedar"
        policy_file.write_text(NO_PAYMENTS, encoding="utf-8")
        st = policy_file.stat()
        os.utime(policy_file, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        after = [blocked_within_seconds(second), blocked_within_seconds(first)]
    finally:
        first.stop()
        second.stop()

    old = before[0]["side_effects"][0].rsplit("policy set ", 1)[1]
    assert before[1]["side_effects"][0].endswith(old)
    for event in after:
        assert event["status"] == "blocked"
        assert "deny by payments-frozen (payments are frozen)" in event["observation"]
        assert old.rstrip("]") not in event["observation"]
