"""The guarded-call API and the ReAct engine decide alike: over generated calls of one agent
(declared tools with their own approval condition, arguments of the wrong type or numbers
sent as text, a hook that blocks and one that rewrites), ``POST /api/v1/calls`` and a ReAct
run (ScriptedLLM) reach the same decision (allow / deny / pending) and, when allowed, the
same final arguments."""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest

from hookgate import Agent, ScriptedLLM, tool
from hookgate.approvals.service import ApprovalAsk, ApprovalDecision
from hookgate.engines.react import ReActEngine
from hookgate.hooks.services import HookServices
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest
from tests.live_server import LiveServer, live_server

BOT = "tok-bot"
RAN: list[tuple[str, dict[str, Any]]] = []


@tool(requires_confirmation=lambda a: a["amount"] > 50_000, connector="purchasing",
      writes=True)
def oa__purchase_pay(amount: float, vendor: str) -> str:
    """Pay a vendor."""
    RAN.append(("oa__purchase_pay", {"amount": amount, "vendor": vendor}))
    return "paid"


@tool
def crm__lookup(customer: str, limit: int = 10) -> str:
    """Look a customer up."""
    RAN.append(("crm__lookup", {"customer": customer, "limit": limit}))
    return "found"


def twin() -> Agent:
    return Agent(
        id="twin", name="twin", instructions="You pay.", tools=[oa__purchase_pay, crm__lookup],
        org_id="acme", owner_user_id="alice", confirmation_approver_scope="agent_owner",
        model_config_json={"hooks": {"python_hooks": [
            {"event": "PreToolUse", "function": "tests.external.twin_hooks:twin_guard"}]}})


@pytest.fixture(scope="module")
def srv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    url = f"sqlite+aiosqlite:///{tmp_path_factory.mktemp('twin') / 'hookgate.db'}"
    deployment = Deployment(
        database_url=url, orgs=[OrgSpec("acme", "ACME")],
        users=[UserSpec("alice", "acme", admin=True, token_sha256=token_digest("tok-alice")),
               UserSpec("bot", "acme", token_sha256=token_digest(BOT))],
        agents={"twin": twin()}, model_for=lambda _a: ScriptedLLM([{"answer": "-"}]),
        channels=[])
    with live_server(deployment) as server:
        yield server


@dataclass
class Person:
    """The engine's approval service: it records that a person was asked and says no."""

    asked: list[ApprovalAsk] = field(default_factory=list)

    async def request_and_wait(self, ask: ApprovalAsk) -> ApprovalDecision:
        self.asked.append(ask)
        return ApprovalDecision(request_id="req-twin", status="rejected",
                                args_sha256=ask.args_sha256, reason="differential")


async def on_engine(name: str, arguments: dict[str, Any]) -> tuple[str, dict[str, Any] | None]:
    RAN.clear()
    person = Person()
    model = ScriptedLLM([{"tool_calls": [{"id": "call_0", "name": name, "args": arguments}]},
                         {"answer": "done"}])
    engine = ReActEngine(model, services=HookServices(approvals=person))
    await engine.run(twin(), "go", user_id="bot")
    if RAN:
        return "allow", RAN[0][1]
    return ("pending" if person.asked else "deny"), None


_ids = itertools.count()


def on_api(srv: LiveServer, name: str, arguments: dict[str, Any]
           ) -> tuple[str, dict[str, Any] | None]:
    r = httpx.post(f"{srv.url}/api/v1/calls", headers={"Authorization": f"Bearer {BOT}"},
                   timeout=30, json={"agent": "twin", "session_id": "s-twin",
                                     "call_id": f"d{next(_ids)}", "tool": name,
                                     "arguments": arguments})
    if r.status_code in (400, 422):
        return "deny", None
    assert r.status_code == 200, r.text
    answer = r.json()
    return answer["decision"], answer["arguments"] if answer["decision"] == "allow" else None


AMOUNTS: list[Any] = [5, 999.5, 1500, 50_000, 60_000, "60000", "100", "lots", "", None, True,
                      [1], {"n": 1}, -3, "1e3", 2**60]
VENDORS: list[Any] = ["acme", "evil", "cap", 7, None, ""]


def generated(seed: int = 39, count: int = 60) -> list[tuple[str, dict[str, Any]]]:
    pick = random.Random(seed)
    calls: list[tuple[str, dict[str, Any]]] = []
    for _ in range(count):
        if pick.random() < 0.7:
            args: dict[str, Any] = {"amount": pick.choice(AMOUNTS),
                                    "vendor": pick.choice(VENDORS)}
            if pick.random() < 0.15:
                args.pop(pick.choice(["amount", "vendor"]))
            if pick.random() < 0.1:
                args["note"] = "extra"
            calls.append(("oa__purchase_pay", args))
        else:
            lookup: dict[str, Any] = {"customer": pick.choice(["bob", 7, None, "evil"])}
            if pick.random() < 0.6:
                lookup["limit"] = pick.choice([3, "4", "many", 2.0, 2.5, None])
            calls.append(("crm__lookup", lookup))
    return calls


async def test_the_api_and_the_engine_decide_generated_calls_alike(
        srv: LiveServer, attempt: Any) -> None:
    differ = []
    seen = set()
    for name, arguments in generated():
        engine = await on_engine(name, arguments)
        api = on_api(srv, name, arguments)
        seen.add(engine[0])
        if engine != api:
            differ.append((name, arguments, engine, api))
    attempt.record("external: the guarded-call API and the engine decide differently",
                   bool(differ))
    assert not differ, "\n".join(map(repr, differ))
    assert seen == {"allow", "deny", "pending"}  # the generated calls reach every decision
