"""The approval gate traces a call's provenance when the call is judged anew (its standing
rules matched, its quorum read, its request made), and not when the call resumes at a
request that exists: that request decides it, as it was asked. Over a real server's HTTP
routes, on SQLite and PostgreSQL, with a quorum rule whose ``when`` reads provenance and no
hook that reads it: hookgate's own engine (a parked run continued after its decision) and
the guarded-call API (an outside agent asking again under the same call id)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from hookgate import Agent, ScriptedLLM, tool
from hookgate.approvals.quorum_rule import QuorumRule
from hookgate.client import Allowed, Client, Pending
from hookgate.client.errors import GuardRefused
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest
from tests.live_server import LiveServer, live_server
from tests.provenance import test_paths
from tests.provenance.test_lazy import FactReads, fact_reads  # noqa: F401 (a fixture)
from tests.provenance.test_paths import ATTACKER, INBOX, REQUEST
from tests.runs_over_http import ended, parked

pytestmark = pytest.mark.both_databases

TOKENS = {"alice": "tok-alice", "bob": "tok-bob", "bot": "tok-bot"}
SENT: list[str] = []


@tool(writes=False)
async def read_inbox() -> str:
    """Read the inbox."""
    return INBOX


@tool(writes=True, requires_confirmation=True)
async def send_email(to: str) -> str:
    """Send an email."""
    SENT.append(to)
    return f"sent to {to}"


#: Two approvers for a send whose address only an untrusted result gave.
QUORUM = QuorumRule.parse("send_email", '"to" in provenance.untrusted_args', 2, None)


def mailer(agent_id: str) -> Agent:
    return Agent(id=agent_id, name=agent_id, instructions="", tools=[read_inbox, send_email],
                 org_id="acme", owner_user_id="alice",
                 confirmation_approver_scope="org_members", confirmation_mode="inline_only",
                 approval_quorum=(QUORUM,),
                 model_config_json={"hooks": {"untrusted_output": ["read_inbox"]}})


#: ``relay`` mails the address the inbox gave; ``direct`` the one the user gave.
SCRIPTS: dict[str, list[dict[str, Any]]] = {
    "relay": [{"tool_calls": [{"name": "read_inbox", "args": {}}]},
              {"tool_calls": [{"name": "send_email", "args": {"to": ATTACKER}}]},
              {"answer": "sent"}],
    "direct": [{"tool_calls": [{"name": "send_email", "args": {"to": "bob@example.org"}}]},
               {"answer": "sent"}],
}


def outside() -> Agent:
    """An agent that runs elsewhere (the guarded-call API): its sends need a person."""
    agent = mailer("outside")
    return Agent(id=agent.id, name=agent.name, instructions="", tools=[], org_id="acme",
                 owner_user_id="alice", confirmation_approver_scope="org_members",
                 approval_quorum=(QUORUM,), model_config_json={
                     "hooks": {"untrusted_output": ["read_inbox"]},
                     "guarded_calls": {"rules": [
                         {"matcher": "read_inbox", "writes": False},
                         {"matcher": "send_email", "requires_confirmation": True}]}})


def deployment(url: str) -> Deployment:
    return Deployment(
        database_url=url, orgs=[OrgSpec("acme", "ACME")],
        users=[UserSpec(user, "acme", admin=user == "alice",
                        token_sha256=token_digest(token)) for user, token in TOKENS.items()],
        agents={**{name: mailer(name) for name in SCRIPTS}, "outside": outside()},
        model_for=lambda agent_id: ScriptedLLM(SCRIPTS[agent_id]), channels=[])


@pytest.fixture
def server(database_url: str) -> Iterator[LiveServer]:
    with live_server(deployment(database_url)) as srv:
        yield srv


def client(server: LiveServer, user: str) -> httpx.Client:
    return httpx.Client(base_url=server.url, timeout=30,
                        headers={"Authorization": f"Bearer {TOKENS[user]}"})


def test_provenance_is_traced_to_judge_a_call_and_not_read_again_when_it_resumes(
        server: LiveServer, fact_reads: FactReads) -> None:  # noqa: F811 (a fixture)
    SENT.clear()
    with client(server, "alice") as alice, client(server, "bob") as bob:
        relay_run, relayed = parked(alice, "relay", REQUEST)
        direct_run, direct = parked(alice, "direct", REQUEST)
        # Judged with the call's provenance: an address only the inbox gave needs the
        # quorum, the user's own needs one person. Untraced, the rule could not be read
        # and would pick both calls (fail closed).
        assert relayed["approvals"]["required"] == 2, relayed
        assert direct["approvals"]["required"] == 1, direct
        assert SENT == []

        before = fact_reads.count
        alice.post(f"/api/confirmations/{direct['id']}/respond",
                   json={"decision": "approve"}).raise_for_status()
        assert ended(alice, direct_run)["status"] == "completed"
        assert SENT == ["bob@example.org"]

        alice.post(f"/api/confirmations/{relayed['id']}/respond",
                   json={"decision": "approve"}).raise_for_status()
        assert SENT == ["bob@example.org"]  # one approval of two: the call waits
        bob.post(f"/api/confirmations/{relayed['id']}/respond",
                 json={"decision": "approve"}).raise_for_status()
        assert ended(alice, relay_run)["status"] == "completed"
        assert SENT == ["bob@example.org", ATTACKER]
        # Each call resumed at its decided request: the session's facts were not read.
        assert fact_reads.count == before


def test_an_outside_agent_asking_again_at_its_decided_request_reads_no_facts(
        server: LiveServer, fact_reads: FactReads) -> None:  # noqa: F811 (a fixture)
    with client(server, "alice") as alice, Client(server.url, TOKENS["bot"],
                                                  framework="langgraph") as guard:
        guard.start_session(agent="outside", session_id="s", request=REQUEST)
        test_paths.read_inbox(guard, "s", "r1", agent="outside")
        relayed = guard.before_call(agent="outside", session_id="s", call_id="w1",
                                    tool="send_email", arguments={"to": ATTACKER})
        direct = guard.before_call(agent="outside", session_id="s", call_id="w2",
                                   tool="send_email", arguments={"to": "bob@example.org"})
        assert isinstance(relayed, Pending) and isinstance(direct, Pending)
        required = {r["id"]: r["approvals"]["required"] for r in alice.get(
            "/api/confirmations", params={"status": "pending"}).raise_for_status().json()}
        assert (required[relayed.request_id], required[direct.request_id]) == (2, 1)

        alice.post(f"/api/confirmations/{direct.request_id}/respond",
                   json={"decision": "approve"}).raise_for_status()
        before = fact_reads.count
        again = guard.before_call(agent="outside", session_id="s", call_id="w2",
                                  tool="send_email", arguments={"to": "bob@example.org"})
        assert isinstance(again, Allowed), again
        assert fact_reads.count == before  # decided by its request: no facts read
        # The approval is this call's alone: another address under the call id is refused.
        with pytest.raises(GuardRefused, match="call id 'w2' was already used"):
            guard.before_call(agent="outside", session_id="s", call_id="w2",
                              tool="send_email", arguments={"to": ATTACKER})
