"""Approve with edits and reject with a message, through a real server: the edited call is
the one that runs (and nothing else), the model is told what changed or what the approver
said, every route shows original and edited arguments, and edits that may not run are
refused with nothing changed."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.live_server import LiveServer, live_server
from tests.portal.steps import pending_request, start_run, wait_finished
from tests.server.demo_world import TOKENS, Ledger, auth, world

ASKED = {"amount": 60000.0, "vendor": "ACME"}


def _tool_messages(srv: LiveServer, run_id: str) -> list[str]:
    state = srv.call(srv.runtime.runs.store.load(run_id))
    return [str(m["content"]) for m in state.messages if m.get("role") == "tool"]


def _cli(srv: LiveServer, *args: str, user: str = "alice") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "hookgate.cli.main", "approvals", *args, "--url", srv.url,
         "--token", TOKENS[user]], capture_output=True, text=True, timeout=60)


def _respond(c: httpx.Client, request_id: str, body: dict[str, Any],
             user: str = "alice") -> httpx.Response:
    return c.post(f"/api/confirmations/{request_id}/respond", json=body, headers=auth(user))


def _status(c: httpx.Client, request_id: str) -> str:
    return str(c.get(f"/api/confirmations/{request_id}", headers=auth("alice")).json()["status"])


@pytest.mark.both_databases
def test_an_approved_edit_runs_exactly_the_edited_call_and_the_model_is_told(
        database_url: str) -> None:
    deployment, bank = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start_run(c, "Pay ACME 60000")
        request = pending_request(c)
        assert request["can_edit"] is True
        r = _respond(c, request["id"], {"decision": "approve", "arguments": {
            "amount": 40000, "vendor": "ACME"}, "message": "40k now, the rest next month"})
        assert r.status_code == 200, r.text
        decided = r.json()
        assert wait_finished(c, run_id) == "completed"

        # Only the edited call ran, once.
        assert bank.payments == [{"amount": 40000.0, "vendor": "ACME"}]
        # The record keeps what was asked and what was approved, each with its digest.
        payload = decided["payload"]
        assert payload["args"] == ASKED
        assert payload["edited_args"] == {"amount": 40000.0, "vendor": "ACME"}
        assert payload["edited_args_sha256"] != payload["args_sha256"]
        assert decided["changes"] == [{"path": "amount", "before": 60000.0, "after": 40000.0}]
        assert decided["decision"]["message"] == "40k now, the rest next month"
        # The model read the tool's result with what was changed and the approver's words.
        [told] = _tool_messages(srv, run_id)
        assert told == (
            "paid 40000 to ACME\n\n"
            f"Note: alice changed the arguments before approving (request {request['id']}), "
            "and the call ran with the changed ones: amount: 60000.0 → 40000.0.\n"
            "Message from alice: 40k now, the rest next month")
        # The trace shows the call with the arguments it ran with.
        run = c.get(f"/api/runs/{run_id}", headers=auth("alice")).json()
        [result] = [e for e in run["trace"] if e["type"] == "tool_result"]
        assert result["args"] == {"amount": 40000.0, "vendor": "ACME"}
        [resolved] = [e for e in run["trace"] if e["type"] == "confirmation_resolved"]
        assert resolved["changes"] == decided["changes"]

        shown = _cli(srv, "show", request["id"])
        assert shown.returncode == 0, shown.stderr
        assert '{"amount": 60000.0, "vendor": "ACME"}' in shown.stdout
        assert '{"amount": 40000.0, "vendor": "ACME"}' in shown.stdout
        assert "amount: 60000.0 → 40000.0" in shown.stdout
        assert "40k now, the rest next month" in shown.stdout
        listed = _cli(srv, "list", "--status", "all")
        assert "edited: amount: 60000.0 → 40000.0" in listed.stdout


def test_the_cli_approves_with_set_and_with_args(database_url: str) -> None:
    turns = [
        {"tool_calls": [{"id": "a", "name": "oa__purchase_pay", "args": ASKED}]},
        {"tool_calls": [{"id": "b", "name": "oa__purchase_pay", "args": ASKED}]},
        {"answer": "done"},
    ]
    deployment, bank = world(database_url, turns=turns)
    deployment.agents["buyer"] = dataclasses.replace(deployment.agents["buyer"],
                                                     refuse_retry_after_rejection=False)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start_run(c)
        first = pending_request(c)
        out = _cli(srv, "approve", first["id"], "--set", "amount=45000", "--set",
                   "vendor=ACME Ltd")
        assert out.returncode == 0, out.stderr
        assert "approved by alice via cli" in out.stdout
        assert 'amount: 60000.0 → 45000.0; vendor: "ACME" → "ACME Ltd"' in out.stdout
        second = _wait_other_pending(c, first["id"])
        out = _cli(srv, "approve", second["id"], "--args",
                   json.dumps({"amount": 51000, "vendor": "ACME"}))
        assert out.returncode == 0, out.stderr
        assert wait_finished(c, run_id) == "completed"
        assert bank.payments == [{"amount": 45000.0, "vendor": "ACME Ltd"},
                                 {"amount": 51000.0, "vendor": "ACME"}]
        # A malformed --set or --args is refused before anything is sent.
        bad = _cli(srv, "approve", second["id"], "--set", "amount")
        assert bad.returncode != 0 and "path=value" in bad.stderr + bad.stdout


def _wait_other_pending(c: httpx.Client, seen: str) -> dict[str, Any]:
    import time

    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        pending = [r for r in c.get("/api/confirmations", params={"status": "pending"},
                                    headers=auth("alice")).json() if r["id"] != seen]
        if pending:
            return dict(pending[0])
        time.sleep(0.05)
    raise AssertionError("no second request")


@pytest.mark.parametrize(("arguments", "error"), [
    ({"amount": "lots", "vendor": "ACME"}, "amount"),
    ({"amount": 40000, "vendor": "ACME", "iban": "XX00"}, "iban"),
    ({"vendor": "ACME"}, "amount"),
    ({"amount": 40000, "vendor": "\ud800"}, "surrogate"),
    ({"amount": 40000, "vendor": "ACME", "deep": json.loads("[" * 300 + "]" * 300)}, "deep"),
    ({"amount": 2**60, "vendor": "ACME"}, "outside"),
])
def test_edits_that_may_not_run_are_refused_and_nothing_changes(
        database_url: str, arguments: dict[str, Any], error: str) -> None:
    deployment, bank = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        start_run(c)
        request = pending_request(c)
        body = json.dumps({"decision": "approve", "arguments": arguments})
        r = c.post(f"/api/confirmations/{request['id']}/respond", content=body,
                   headers={**auth("alice"), "Content-Type": "application/json"})
        assert r.status_code == 422, r.text
        assert error in r.json()["error"]
        assert _status(c, request["id"]) == "pending"
        assert bank.payments == []
        srv.call(srv.runtime.approvals.cancel(request["id"], "test over"))


def test_nan_and_infinity_in_an_edit_are_refused(database_url: str) -> None:
    deployment, bank = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        start_run(c)
        request = pending_request(c)
        for number in ("NaN", "Infinity", "-Infinity", "1e400"):
            # Python's json reads these bare words; a strict client could not send them.
            body = '{"decision": "approve", "arguments": {"amount": %s, "vendor": "ACME"}}'
            r = c.post(f"/api/confirmations/{request['id']}/respond",
                       content=body % number,
                       headers={**auth("alice"), "Content-Type": "application/json"})
            assert r.status_code == 422, (number, r.text)
            assert "finite" in r.json()["error"]
        assert _status(c, request["id"]) == "pending" and bank.payments == []
        srv.call(srv.runtime.approvals.cancel(request["id"], "test over"))


def test_who_may_edit_and_when(database_url: str) -> None:
    deployment, bank = world(database_url)  # approver scope: the initiator (alice)
    edit = {"decision": "approve", "arguments": {"amount": 1, "vendor": "ACME"}}
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start_run(c)
        request = pending_request(c)
        r = _respond(c, request["id"], edit, user="bob")
        assert r.status_code == 403 and "only the user who started the run" in r.text
        r = _respond(c, request["id"], edit, user="mallory")
        assert r.status_code == 404
        r = _respond(c, request["id"], {"decision": "reject", "arguments": edit["arguments"]})
        assert r.status_code == 422 and "only an approval" in r.text
        assert _status(c, request["id"]) == "pending"

        assert _respond(c, request["id"], {"decision": "approve"}).status_code == 200
        assert wait_finished(c, run_id) == "completed"
        late = _respond(c, request["id"], edit)
        assert late.status_code == 409 and "already decided: approved" in late.text
        assert bank.payments == [{"amount": 60000.0, "vendor": "ACME"}]
        record = c.get(f"/api/confirmations/{request['id']}", headers=auth("alice")).json()
        assert record["payload"]["edited_args"] is None and record["changes"] == []


def test_an_edit_back_to_the_asked_arguments_is_a_plain_approval(database_url: str) -> None:
    deployment, bank = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start_run(c)
        request = pending_request(c)
        r = _respond(c, request["id"], {"decision": "approve",
                                        "arguments": {"vendor": "ACME", "amount": 60000}})
        assert r.status_code == 200
        assert r.json()["payload"]["edited_args"] is None
        assert wait_finished(c, run_id) == "completed"
        assert bank.payments == [ASKED]
        assert "changed the arguments" not in _tool_messages(srv, run_id)[0]


def _with_hooks(bank_world: tuple[Any, Ledger], hooks: dict[str, Any]) -> tuple[Any, Ledger]:
    deployment, bank = bank_world
    agent = deployment.agents["buyer"]
    deployment.agents["buyer"] = dataclasses.replace(agent, model_config_json={"hooks": hooks})
    return deployment, bank


def test_the_rechecks_after_approval_run_on_the_edited_arguments(
        database_url: str, tmp_path: Path) -> None:
    # A declared hook that refuses the vendor EVIL, checked again after the approval.
    command = "if grep -q EVIL; then echo 'EVIL is not a vendor we pay' >&2; exit 2; fi"
    deployment, bank = _with_hooks(world(database_url), {"command_hooks": [{
        "event": "PreToolUse", "matcher": "oa__purchase_pay", "name": "vendor-check",
        "command": command, "recheck_after_approval": True}]})
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start_run(c)
        request = pending_request(c)  # ACME passed the hook the first time
        r = _respond(c, request["id"], {"decision": "approve",
                                        "arguments": {"amount": 100, "vendor": "EVIL"}})
        assert r.status_code == 200, r.text
        assert wait_finished(c, run_id) == "completed"
        assert bank.payments == []
        [told] = _tool_messages(srv, run_id)
        assert "EVIL is not a vendor we pay" in told and "checked again" in told


def test_a_read_only_org_refuses_an_edited_write_after_the_approval(database_url: str) -> None:
    deployment, bank = _with_hooks(world(database_url), {"class_hooks": ["readonly_guard"]})
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start_run(c)
        request = pending_request(c)
        flag = c.put("/api/orgs/acme/read_only", json={"read_only": True}, headers=auth("alice"))
        assert flag.status_code == 200
        r = _respond(c, request["id"], {"decision": "approve",
                                        "arguments": {"amount": 10, "vendor": "ACME"}})
        assert r.status_code == 200
        assert wait_finished(c, run_id) == "completed"
        assert bank.payments == []
        [told] = _tool_messages(srv, run_id)
        assert "read-only" in told


@pytest.mark.both_databases
def test_a_rejection_message_reaches_the_model_and_every_view(database_url: str) -> None:
    deployment, bank = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        run_id = start_run(c)
        request = pending_request(c)
        out = _cli(srv, "reject", request["id"], "--reason", "over budget", "--message",
                   "Ask Olivia for a quote under 50,000 first.")
        assert out.returncode == 0, out.stderr
        assert wait_finished(c, run_id) == "completed"
        assert bank.payments == []
        [told] = _tool_messages(srv, run_id)
        assert told == (
            f"Not approved: 'oa__purchase_pay' was rejected by alice (request {request['id']})"
            ": over budget. The call did not run. Message from alice: Ask Olivia for a quote "
            "under 50,000 first.")
        record = c.get(f"/api/confirmations/{request['id']}", headers=auth("alice")).json()
        assert record["decision"]["message"] == "Ask Olivia for a quote under 50,000 first."
        shown = _cli(srv, "show", request["id"])
        assert "Ask Olivia for a quote under 50,000 first." in shown.stdout
        too_long = _respond(c, request["id"], {"decision": "reject", "message": "x" * 2001})
        assert too_long.status_code == 422


@pytest.mark.both_databases
def test_words_no_store_can_keep_exactly_are_refused(database_url: str) -> None:
    deployment, bank = world(database_url)
    with live_server(deployment) as srv, httpx.Client(base_url=srv.url, timeout=20) as c:
        start_run(c)
        request = pending_request(c)
        for body in ('{"decision": "reject", "message": "no\\u0000way"}',
                     '{"decision": "reject", "reason": "no\\u0000way"}',
                     '{"decision": "reject", "message": "\\ud800"}'):
            r = c.post(f"/api/confirmations/{request['id']}/respond", content=body,
                       headers={**auth("alice"), "Content-Type": "application/json"})
            assert r.status_code == 422, (body, r.text)
        assert _status(c, request["id"]) == "pending" and bank.payments == []
        srv.call(srv.runtime.approvals.cancel(request["id"], "test over"))
