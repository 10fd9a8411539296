"""One masked value for argument values on every surface a member can read.

A secret sits in a secret-keyed argument (``api_token``) of a gated call. An approver edits
it (and the amount), another call is rejected, a standing rule approves a third, and a
quorum of two approves a fourth. Then everything a member who may not read the exact
arguments can see is searched for the secret: the run and its event stream, the inbox API
and its CLI, the audit API and its CLI, what the model read, the OpenTelemetry spans, the
chat cards and their updates, and the guarded-call API's note. Org admins read the exact
arguments in a run's trace, as documented (docs/deployment/security.md).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from hookgate import Agent, ScriptedLLM, tool
from hookgate.approvals.card_text import card_edits
from hookgate.approvals.edits import changes, edit_summary, model_note
from hookgate.approvals.quorum import QuorumRule
from hookgate.channels.base import CardOutcome
from hookgate.channels.card_text import decision_lines
from hookgate.client import Client, Pending
from hookgate.hooks.withheld import MASK, shown_changes
from hookgate.runtime.deployment import ChannelSpec, Deployment, OrgSpec, UserSpec, token_digest
from hookgate.server.trace_view import for_caller
from hookgate.telemetry.switch import SWITCH
from hookgate.tools.tool import Tool
from tests.channels.conftest import secrets_key, slack
from tests.fakes.slack import FakeSlack
from tests.live_server import LiveServer, live_server
from tests.sse import read_events
from tests.telemetry.conftest import Otel, otel

__all__ = ["otel", "secrets_key", "slack"]

#: The secret the model's call carries, and the one the approver puts in its place.
OLD = "sk-planted-OLD-5c1e77"
NEW = "sk-planted-NEW-9d2f31"
MARKERS = (OLD, NEW)
TOKENS = {name: f"tok-{name}" for name in ("alice", "olivia", "bob", "carol", "bot")}
SLACK_IDS = {"alice": "U_ALICE", "olivia": "U_OLIVIA", "bob": "U_BOB", "carol": "U_CAROL"}
PAY = {"amount": 60000, "vendor": "ACME GMBH", "api_token": OLD}
EDIT = {"amount": 40000, "vendor": "ACME GMBH", "api_token": NEW}
WAIT_S = 30.0


def auth(user: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[user]}"}


def leaks(value: Any) -> list[str]:
    text = value if isinstance(value, str) else json.dumps(value, default=str,
                                                           ensure_ascii=False)
    return [m for m in MARKERS if m in text]


# -- unit: the owner's answers ------------------------------------------------------------


def test_a_secret_keyed_change_reads_masked_in_the_model_note_and_the_summary() -> None:
    found = changes(PAY, EDIT)
    note = model_note("req-1", "olivia", found, None)
    assert leaks(note) == [] and "api_token" in note and MASK in note
    assert "amount: 60000 → 40000" in note
    summary = edit_summary(PAY, EDIT)
    assert leaks(summary) == [] and "amount: 60000 → 40000" in summary
    assert f'api_token: "{MASK}" → "{MASK}"' in summary
    nested = edit_summary({"auth": {"password": OLD}, "n": 1}, {"auth": {"password": NEW}})
    assert leaks(nested) == [] and "n: removed" in nested
    assert edit_summary(PAY, PAY) is None


#: An edit that changes a nested secret, adds a secret-keyed key, and adds a mapping and a list
#: that hold secrets under plain keys.
NESTED_BEFORE = {"auth": {"password": OLD}, "amount": 1}
NESTED_AFTER = {"auth": {"password": NEW}, "amount": 2, "api_key": NEW,
                "extra": {"token": NEW}, "items": [{"cookie": NEW}]}


def test_every_shape_of_a_secret_edit_is_masked_for_members_cards_and_the_model() -> None:
    found = changes(NESTED_BEFORE, NESTED_AFTER)
    resolved = {"type": "confirmation_resolved", "request_id": "r", "changes": found}
    # A delegate's decision event, nested in its parent's trace.
    event = {"type": "delegate_end", "trace": [resolved]}
    member = for_caller([resolved, event], admin=False)
    assert leaks(member) == [] and leaks(for_caller([resolved], admin=True)) == list(MARKERS)
    [amount] = [c for c in member[0]["changes"] if c["path"] == "amount"]
    assert (amount["before"], amount["after"]) == (1, 2)
    assert leaks(model_note("r", "olivia", found, None)) == []
    assert leaks(edit_summary(NESTED_BEFORE, NESTED_AFTER)) == []
    edits = card_edits(found)
    outcome = CardOutcome("r", "approved", edits=edits, changes=shown_changes(found))
    assert leaks([e.text for e in edits]) == [] and leaks(decision_lines(
        outcome, text_chars=2000)) == []
    # A channel's own pattern masks the whole line of a path it names.
    assert decision_lines(outcome, text_chars=2000, patterns=("amount",))[0].count(MASK) >= 2


# -- end to end -----------------------------------------------------------------------------


def wire_transfer() -> Tool:
    @tool(requires_confirmation=True, writes=True, confirmation_reason="every transfer")
    async def wire_transfer(amount: float, vendor: str, api_token: str) -> str:
        """Send money to a vendor."""
        return f"sent {amount:.0f} to {vendor}"

    return wire_transfer


class Model:
    """The model: asks for one transfer, then answers; records everything it read."""

    def __init__(self) -> None:
        self.read: list[dict[str, Any]] = []

    def turn(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        self.read += messages
        if any(m.get("role") == "tool" for m in messages):
            return {"answer": "done"}
        return {"tool_calls": [{"name": "wire_transfer", "args": PAY}]}


def deployment(database_url: str, slack: FakeSlack, model: Model) -> Deployment:
    hooks = {"hooks": {"class_hooks": ["audit_log"]}}

    def agent(agent_id: str, **options: Any) -> Agent:
        return Agent(id=agent_id, name=agent_id, instructions="", org_id="acme",
                     owner_user_id="olivia", tools=[wire_transfer()],
                     approval_channel_id="ops-slack", model_config_json=hooks, **options)

    remote = Agent(
        id="remote", name="remote", instructions="", tools=[], org_id="acme",
        owner_user_id="olivia", confirmation_approver_scope="agent_owner",
        model_config_json={**hooks, "guarded_calls": {"rules": [
            {"matcher": "wire_transfer", "requires_confirmation": True}]}})
    users = [UserSpec(name, "acme", admin=name == "alice",
                      token_sha256=token_digest(TOKENS[name]),
                      slack_user_id=SLACK_IDS.get(name)) for name in TOKENS]
    return Deployment(
        database_url=database_url, orgs=[OrgSpec("acme", "ACME Corp")], users=users,
        agents={
            "payer": agent("payer", confirmation_approver_scope="agent_owner"),
            "quorum": agent("quorum", confirmation_approver_scope="org_members",
                            allow_self_approval=False, approval_quorum=(QuorumRule.parse(
                                "wire_transfer", None, 2, None),)),
            "remote": remote,
        },
        channels=[ChannelSpec("ops-slack", "slack", "acme", slack.channel_config())],
        model_for=lambda _a: ScriptedLLM(model.turn),
    )


def eventually(probe: Callable[[], Any], what: str) -> Any:
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        found = probe()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def start(c: httpx.Client, agent_id: str) -> str:
    r = c.post("/api/runs", json={"agent_id": agent_id, "message": "pay ACME"},
               headers=auth("bob"))
    assert r.status_code == 200, r.text
    return str(r.json()["run_id"])


def pending_of(c: httpx.Client, run_id: str) -> str:
    def probe() -> str | None:
        for r in c.get("/api/confirmations", params={"status": "pending"},
                       headers=auth("alice")).json():
            if r["run_id"] == run_id:
                return str(r["id"])
        return None

    return str(eventually(probe, f"the request of run {run_id}"))


def finished(c: httpx.Client, run_id: str) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        body: dict[str, Any] = c.get(f"/api/runs/{run_id}", headers=auth("alice")).json()
        return None if body["status"] in ("running", "awaiting_approval") else body

    return dict(eventually(probe, f"run {run_id} to finish"))


def respond(c: httpx.Client, request_id: str, user: str, decision: str,
            **extra: Any) -> dict[str, Any]:
    r = c.post(f"/api/confirmations/{request_id}/respond",
               json={"decision": decision, **extra}, headers=auth(user))
    assert r.status_code == 200, r.text
    return dict(r.json())


def cli(srv: LiveServer, user: str, *args: str) -> str:
    done = subprocess.run([sys.executable, "-m", "hookgate.cli.main", *args, "--url",
                           srv.url, "--token", TOKENS[user]], capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def without(listed: str, request_id: str) -> str:
    """``hookgate approvals list`` output without the lines of ``request_id``."""
    kept, skipping = [], False
    for line in listed.splitlines():
        if not line.startswith(" "):
            skipping = line.startswith(request_id)
        if not skipping:
            kept.append(line)
    return "\n".join(kept)


def what_a_member_reads(srv: LiveServer, c: httpx.Client, user: str, runs: list[str],
                        requests: list[str], unseen: str | None = None) -> dict[str, Any]:
    """What ``user`` reads about ``runs`` and ``requests``; ``unseen``: a request they may
    decide (and so read exact), left out of the lists."""
    seen: dict[str, Any] = {}
    for run_id in runs:
        seen[f"GET /api/runs/{run_id}"] = c.get(f"/api/runs/{run_id}", headers=auth(user)).json()
        with c.stream("GET", f"/api/runs/{run_id}/events", headers=auth(user)) as resp:
            seen[f"events of {run_id}"] = [ev.data for ev in read_events(resp)
                                           if not ev.comment and ev.data]
    seen["GET /api/confirmations"] = [r for r in c.get("/api/confirmations",
                                                        headers=auth(user)).json()
                                      if r["id"] != unseen]
    for request_id in requests:
        seen[f"GET /api/confirmations/{request_id}"] = c.get(
            f"/api/confirmations/{request_id}", headers=auth(user)).json()
        seen[f"hookgate approvals show {request_id}"] = cli(srv, user, "approvals", "show",
                                                             request_id)
    seen["hookgate approvals list"] = without(
        cli(srv, user, "approvals", "list", "--status", "all"), str(unseen))
    seen["GET /api/audit"] = c.get("/api/audit", headers=auth(user)).json()
    seen["hookgate audit list"] = cli(srv, user, "audit", "list", "--json")
    seen["hookgate audit list (table)"] = cli(srv, user, "audit", "list")
    return seen


def span_texts(otel: Otel) -> list[str]:
    texts = []
    for span in otel.spans():
        texts += [span.name, span.status.description or "",
                  json.dumps(dict(span.attributes or {}), default=str)]
        texts += [json.dumps([e.name, dict(e.attributes or {})], default=str)
                  for e in span.events]
    return texts


@pytest.fixture
def captured(otel: Otel) -> Iterator[Otel]:
    SWITCH.capture_content = True
    yield otel


@pytest.mark.both_databases
def test_a_planted_secret_reaches_no_member_surface_after_edit_reject_rule_and_vote(
        database_url: str, slack: FakeSlack, secrets_key: str, captured: Otel,
        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    logs = caplog
    model = Model()
    with live_server(deployment(database_url, slack, model)) as srv, httpx.Client(
            base_url=srv.url, timeout=30) as c:
        # An edit of the secret and the amount, with words for the model.
        edited_run = start(c, "payer")
        edited = pending_of(c, edited_run)
        decided = respond(c, edited, "olivia", "approve", arguments=EDIT,
                          message="Paying 40,000 now.")
        assert decided["payload"]["edited_args"] == EDIT  # the approver reads it exact
        assert finished(c, edited_run)["status"] == "completed"
        # A rejection.
        rejected_run = start(c, "payer")
        rejected = pending_of(c, rejected_run)
        respond(c, rejected, "olivia", "reject", reason="not this quarter")
        finished(c, rejected_run)
        # An approval that makes a standing rule, then a call the rule approves.
        ruled_run = start(c, "payer")
        ruled = pending_of(c, ruled_run)
        respond(c, ruled, "olivia", "approve", remember={"scope": "agent_user"})
        finished(c, ruled_run)
        by_rule_run = start(c, "payer")
        trace = finished(c, by_rule_run)["trace"]
        assert any(e.get("rule_id") for e in trace if e["type"] == "confirmation_resolved")
        # A quorum of two votes.
        voted_run = start(c, "quorum")
        voted = pending_of(c, voted_run)
        assert respond(c, voted, "olivia", "approve")["status"] == "pending"
        respond(c, voted, "alice", "approve")
        assert finished(c, voted_run)["status"] == "completed"
        # Every card is out and every decided card updated.
        eventually(lambda: len(slack.messages) == 4 and all(
            m.updates for m in slack.messages.values()), "the four cards and their updates")

        runs = [edited_run, rejected_run, ruled_run, by_rule_run, voted_run]
        # Carol may not decide the owner's requests (agent_owner) and is no admin; bob
        # asked for them, so he reads their exact arguments in the inbox, but not in a
        # run's trace. Anyone in the org may vote on the quorum's request: it is read
        # through its run.
        carol = what_a_member_reads(srv, c, "carol", runs, [edited, rejected, ruled], voted)
        bob = {k: v for k, v in what_a_member_reads(srv, c, "bob", runs, []).items()
               if "runs" in k or "events" in k}
        admin = c.get(f"/api/runs/{edited_run}", headers=auth("alice")).json()

    sinks: dict[str, Any] = {
        **{f"carol: {k}": v for k, v in carol.items()},
        **{f"bob: {k}": v for k, v in bob.items()},
        # The model wrote the asked secret itself; it must not be told it back, and must not
        # learn the approver's, not even through a rewritten call of its own.
        "what the model was told": [m for m in model.read if m.get("role") != "assistant"],
        "the model's own turns, as the run replays them": [
            m for m in model.read if m.get("role") == "assistant" and NEW in json.dumps(m)],
        # hookgate's own lines at every level, any library's from INFO up (a database
        # driver's DEBUG lines quote the statements' parameters, as they are meant to).
        "server log lines": [r.getMessage() for r in logs.records
                             if r.name.startswith("hookgate") or r.levelno >= logging.INFO],
        "spans": span_texts(captured),
        "chat cards and their updates": [r.body.decode() for r in slack.received],
    }
    found = {sink: leaks(value) for sink, value in sinks.items() if leaks(value)}
    assert found == {}, "\n".join(f"{k}: {v}" for k, v in found.items())

    # The model was told what changed, the secret masked.
    notes = [m for m in model.read if m.get("role") == "tool"]
    assert any("amount: 60000.0 → 40000.0" in str(m.get("content")) and
               f'api_token: "{MASK}" → "{MASK}"' in str(m.get("content")) for m in notes), notes
    # Members read the edit as the cards show it; admins read a run's trace exact.
    member_trace = carol[f"GET /api/runs/{edited_run}"]["trace"]
    [resolved] = [e for e in member_trace if e["type"] == "confirmation_resolved"]
    assert {c["path"]: (c["before"], c["after"]) for c in resolved["changes"]} == {
        "amount": (60000.0, 40000.0), "api_token": (MASK, MASK)}
    [resolved] = [e for e in admin["trace"] if e["type"] == "confirmation_resolved"]
    assert {c["path"]: (c["before"], c["after"]) for c in resolved["changes"]} == {
        "amount": (60000.0, 40000.0), "api_token": (OLD, NEW)}
    # What the model read is the same for admins: masked.
    [ran] = [e for e in admin["trace"] if e["type"] == "tool_result"]
    assert leaks(ran["observation"]) == [] and MASK in ran["observation"]


@pytest.mark.both_databases
def test_the_guarded_call_note_masks_an_edited_secret(database_url: str, slack: FakeSlack,
                                                      secrets_key: str) -> None:
    schema = {"type": "object", "properties": {"amount": {"type": "integer"},
                                               "vendor": {"type": "string"},
                                               "api_token": {"type": "string"}}}
    with live_server(deployment(database_url, slack, Model())) as srv, httpx.Client(
            base_url=srv.url, timeout=30) as c, Client(srv.url, TOKENS["bot"],
                                                        framework="langgraph") as guard:
        asked = guard.before_call(agent="remote", session_id="s-1", call_id="c-1",
                                  tool="wire_transfer", arguments=PAY, parameters=schema)
        assert isinstance(asked, Pending)
        respond(c, asked.request_id, "olivia", "approve", arguments=EDIT)
        allowed = guard.wait(asked.call, timeout=WAIT_S)
        # The tool runs with the approved arguments; the model's note never holds them.
        assert allowed.arguments == EDIT  # type: ignore[union-attr]
        note = allowed.note  # type: ignore[union-attr]
        assert note is not None and "with edited arguments" in note, note
        assert leaks(note) == [] and "amount: 60000 → 40000" in note, note
