"""The clients carry ``acts_for``: the in-process guards (``AsyncLocalGuard``, ``LocalGuard``)
check it with the same owner as the server (`authority.acting_for`) and make the person it
names the call's initiator, the one an ``initiator``-scoped request lets decide; a per-call
``acts_for`` overrides the constructor's; and the HTTP client sends it (and nothing when it
is unset)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from hookgate import Agent, ScriptedLLM
from hookgate.approvals.eligibility import Approver
from hookgate.approvals.errors import NotEligible
from hookgate.client import AsyncClient, Client, GuardRefused, Pending
from hookgate.client.local import AsyncLocalGuard
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest
from hookgate.runtime.runtime import Runtime

ARGS = {"amount": 5, "to": "bob"}


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    agent = Agent(id="payer", name="payer", instructions="", tools=[], org_id="acme",
                  owner_user_id="bob", confirmation_approver_scope="initiator",
                  model_config_json={"guarded_calls": {"rules": [
                      {"matcher": "transfer", "requires_confirmation": True}]}})
    rt = Runtime(Deployment(
        database_url=f"sqlite+aiosqlite:///{tmp_path / 'hookgate.db'}",
        orgs=[OrgSpec("acme", "ACME"), OrgSpec("evil", "Evil")],
        users=[UserSpec("alice", "acme", token_sha256=token_digest("a")),
               UserSpec("bob", "acme", token_sha256=token_digest("b")),
               UserSpec("bot", "acme", token_sha256=token_digest("t"), service=True),
               UserSpec("mallory", "evil", token_sha256=token_digest("m"))],
        agents={"payer": agent}, model_for=lambda _a: ScriptedLLM([{"answer": "-"}]),
        channels=[]))
    yield rt
    await rt.stop()


async def test_the_in_process_guards_call_acts_for_alice_who_alone_decides(
        runtime: Runtime) -> None:
    guard = AsyncLocalGuard(runtime, framework="crewai", user="bot", acts_for="alice")
    asked = await guard.before_call(agent="payer", session_id="s", call_id="c1",
                                    tool="transfer", arguments=ARGS)
    assert isinstance(asked, Pending)
    request = await runtime.approvals.store.get(asked.request_id)
    assert request is not None and request.requested_by == "alice"
    for who in (Approver("bot", "acme", service=True), Approver("bob", "acme")):
        with pytest.raises(NotEligible):
            await runtime.approvals.decide(asked.request_id, "approve", who)
    # A per-call acts_for names another person for that call.
    other = await guard.before_call(agent="payer", session_id="s", call_id="c2",
                                    tool="transfer", arguments=ARGS, acts_for="bob")
    assert isinstance(other, Pending)
    request = await runtime.approvals.store.get(other.request_id)
    assert request is not None and request.requested_by == "bob"


@pytest.mark.parametrize(("user", "acts_for", "said"), [
    ("bot", "mallory", "not a user of org 'acme'"),
    ("bot", "bot", "is a service identity"),
    ("bot", "ghost", "not a user of org 'acme'"),
    ("alice", "bob", "only a service identity"),
])
async def test_the_in_process_guard_refuses_an_acts_for_the_user_may_not_use(
        runtime: Runtime, user: str, acts_for: str, said: str) -> None:
    guard = AsyncLocalGuard(runtime, framework="crewai", user=user, acts_for=acts_for)
    with pytest.raises(GuardRefused, match=said) as refused:
        await guard.before_call(agent="payer", session_id="s", call_id="c3",
                                tool="transfer", arguments=ARGS)
    assert refused.value.status == 403
    with pytest.raises(GuardRefused, match=said):
        await guard.start_session(agent="payer", session_id="s")


async def test_the_http_clients_send_acts_for_and_a_call_may_override_it() -> None:
    seen: list[dict[str, object]] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(json.loads(request.content))
        if request.url.path.endswith("/sessions"):
            return httpx.Response(200, json={"session_id": "s", "context": None})
        return httpx.Response(200, json={"call": "gc_" + "0" * 40, "decision": "pending",
                                         "request_id": "cr_1"})

    transport = httpx.MockTransport(answer)
    with Client("http://hookgate.test", "t", framework="api", acts_for="alice",
                http=httpx.Client(transport=transport)) as guard:
        guard.start_session(agent="payer", session_id="s")
        guard.before_call(agent="payer", session_id="s", call_id="c", tool="t",
                          arguments={}, acts_for="bob")
    async with AsyncClient("http://hookgate.test", "t", framework="api",
                           http=httpx.AsyncClient(transport=transport)) as plain:
        await plain.before_call(agent="payer", session_id="s", call_id="c", tool="t",
                                arguments={})
    assert [body.get("acts_for", "-") for body in seen] == ["alice", "bob", "-"]
