"""Two `hookgate serve` instances on one PostgreSQL serve the same policy folder: a change
to it is taken by neither until `hookgate policy reload` stamps it, then it is in force on
both within seconds, each decision naming the new version; a stamped change that does not
load leaves it in force on both, and each one's `GET /api/policies/status` says why."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import httpx
import pytest

from hookgate.policies.source import read_policy_files, version_of
from hookgate.policies.stamp import write_stamp
from tests.conftest import _fresh_pg_database
from tests.instances import Instance
from tests.policies.world import INVARIANTS, write_policies

ROOT = Path(__file__).resolve().parents[2]

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


def status_within_seconds(instance: Instance, state: str) -> dict[str, Any]:
    """The instance's one policy set's status once it is in ``state`` (each instance looks
    at the files at most once a second, and a status look is one)."""
    deadline = time.monotonic() + 10
    with httpx.Client(base_url=instance.url, timeout=10,
                      headers={"Authorization": "Bearer tok-alice"}) as c:
        while True:
            answer = c.get("/api/policies/status")
            assert answer.status_code == 200, answer.text
            (shown,) = answer.json()["sets"]
            if shown["state"] == state or time.monotonic() > deadline:
                assert shown["state"] == state, shown
                return dict(shown)
            time.sleep(0.2)


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
        old_version = status_within_seconds(first, "in force")["version"]

        policy_file = folder / "invariants.cedar"
        policy_file.write_text(NO_PAYMENTS, encoding="utf-8")
        st = policy_file.stat()
        os.utime(policy_file, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        for instance in (first, second):  # each looked, and did not take it
            assert status_within_seconds(instance, "not reloaded")["version"] == old_version
        assert [paid_once(first)["status"], paid_once(second)["status"]] == ["ok", "ok"]

        reloaded = subprocess.run(
            [sys.executable, "-m", "hookgate.cli.main", "policy", "reload", "--config",
             str(config)], capture_output=True, text=True, timeout=120, cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": f"{ROOT / 'src'}:{ROOT}"})
        assert reloaded.returncode == 0, reloaded.stdout + reloaded.stderr
        after = [blocked_within_seconds(second), blocked_within_seconds(first)]
        new_version = status_within_seconds(first, "in force")["version"]
        assert status_within_seconds(second, "in force")["version"] == new_version

        policy_file.write_text(NO_PAYMENTS + "\nforbid(principal, action, resource) when "
                               "{ context.nope };\n", encoding="utf-8")
        write_stamp(folder, version_of(read_policy_files(folder)))
        for instance in (first, second):
            failed = status_within_seconds(instance, "reload failed")
            assert failed["version"] == new_version
            assert "policies/invariants.cedar:" in failed["error"]
        still = [paid_once(first), paid_once(second)]
    finally:
        first.stop()
        second.stop()

    old = before[0]["side_effects"][0].rsplit("policy set ", 1)[1]
    assert before[1]["side_effects"][0].endswith(old)
    for event in [*after, *still]:
        assert event["status"] == "blocked"
        assert "deny by payments-frozen (payments are frozen)" in event["observation"]
        assert old.rstrip("]") not in event["observation"]
