"""The approver's context and the decision's channel, through a real server: what is
stored when a request is created (the user's words, the tool, every reason a person is
asked, grouped numbers), what each route shows, and a run that a rejection did not let pay."""

from __future__ import annotations

import dataclasses
import json
import shlex
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.live_server import live_server
from tests.portal.steps import pending_request, start_run, wait_finished
from tests.server.demo_world import TOKENS, auth, world

MESSAGE = "Pay ACME 60000 for the servers"


def asking_world(database_url: str, tmp_path: Path) -> tuple[object, object]:
    """The demo world, with every reason to ask at once: the tool's predicate, the agent's
    require_confirmation_for_all and a declarative hook answering ``ask``."""
    deployment, bank = world(database_url)
    answer = tmp_path / "ask.json"
    answer.write_text(json.dumps({"hookSpecificOutput": {
        "hookEventName": "PreToolUse", "permissionDecision": "ask",
        "permissionDecisionReason": "ACME changed its bank account last week"}}))
    agent = deployment.agents["buyer"]
    deployment.agents["buyer"] = dataclasses.replace(
        agent, require_confirmation_for_all=True,
        model_config_json={"hooks": {"command_hooks": [{
            "event": "PreToolUse", "name": "vendor-watch",
            "command": f"cat {shlex.quote(str(answer))}"}]}})
    return deployment, bank


@pytest.mark.both_databases
def test_the_request_carries_the_context_and_the_decision_its_channel(
        database_url: str, tmp_path: Path) -> None:
    deployment, bank = asking_world(database_url, tmp_path)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start_run(c, MESSAGE)
        request = pending_request(c)
        assert request["payload"]["args"] == {"amount": 60000.0, "vendor": "ACME"}
        context = request["context"]
        assert context["user_message"] == MESSAGE
        assert context["tool_description"] == "Pay a vendor."
        assert [(r["kind"], r["text"]) for r in context["reasons"]] == [
            ("require_confirmation_for_all", "agent 'buyer' has require_confirmation_for_all: "
             "every tool call needs a person's approval"),
            ("tool_rule", "the tool's requires_confirmation predicate matched these arguments"),
            ("hook_ask", "hook 'vendor-watch' answered ask: ACME changed its bank account "
             "last week"),
        ]
        assert context["numbers"] == [{"path": "amount", "text": "60,000"}]
        # The same on the single-request route and in the list.
        one = c.get(f"/api/confirmations/{request['id']}", headers=auth("alice")).json()
        assert one["context"] == context

        # A client cannot claim to be a chat channel; it may say inbox, api or cli.
        r = c.post(f"/api/confirmations/{request['id']}/respond",
                   json={"decision": "approve", "via": "slack"}, headers=auth("alice"))
        assert r.status_code == 422
        assert c.get(f"/api/confirmations/{request['id']}",
                     headers=auth("alice")).json()["status"] == "pending"

        shown = subprocess.run(
            [sys.executable, "-m", "hookgate.cli.main", "approvals", "reject", request["id"],
             "--url", srv.url, "--token", TOKENS["alice"], "--reason", "call ACME first"],
            capture_output=True, text=True, timeout=60)
        assert shown.returncode == 0, shown.stderr
        assert "rejected by alice via cli" in shown.stdout
        assert wait_finished(c, run_id) == "completed"
        assert bank.payments == []

        record = c.get(f"/api/confirmations/{request['id']}", headers=auth("alice")).json()
        assert record["decision"]["via"] == "cli"
        show = subprocess.run(
            [sys.executable, "-m", "hookgate.cli.main", "approvals", "show", request["id"],
             "--url", srv.url, "--token", TOKENS["alice"]],
            capture_output=True, text=True, timeout=60)
        flat = " ".join(show.stdout.split())
        assert "decided rejected by alice via cli" in flat
        assert "reason call ACME first" in flat
        assert f"user asked {MESSAGE}" in flat
        assert "hook 'vendor-watch' answered ask" in flat

        # The run completed, but not as a success: its outcome says a call was not approved.
        run = c.get(f"/api/runs/{run_id}", headers=auth("alice")).json()
        assert (run["status"], run["outcome"]) == ("completed", "not_approved")
        assert run["not_approved"] == [{"request_id": request["id"],
                                        "tool_name": "oa__purchase_pay",
                                        "status": "rejected", "decided_by": "alice"}]
        [listed] = c.get("/api/runs", headers=auth("alice")).json()
        assert listed["outcome"] == "not_approved"
        # The trace speaks of the approval gate, whatever channel there is (none here).
        trace = json.dumps(run["trace"])
        assert "feishu_gate" not in trace and "approval_gate" in trace


def test_an_approved_run_is_a_plain_success_and_an_api_decision_says_api(
        database_url: str) -> None:
    deployment, bank = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start_run(c, MESSAGE)
        request = pending_request(c)
        r = c.post(f"/api/confirmations/{request['id']}/respond",
                   json={"decision": "approve"}, headers=auth("alice"))
        assert r.status_code == 200, r.text
        assert r.json()["decision"]["via"] == "api"
        assert wait_finished(c, run_id) == "completed"
        run = c.get(f"/api/runs/{run_id}", headers=auth("alice")).json()
        assert (run["outcome"], run["not_approved"]) == ("completed", [])
        assert bank.payments == [{"amount": 60000.0, "vendor": "ACME"}]
