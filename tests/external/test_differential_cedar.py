"""Cedar decides alike on both paths: over generated calls of an agent whose calls a Cedar
policy set judges (forbid and permit on arguments, an ``@ask`` permit, numbers sent as text,
values of the wrong type), ``POST /api/v1/calls`` and a ReAct run (ScriptedLLM) over the
same database reach the same decision (allow / deny / pending) and, when allowed, the same
final arguments — on SQLite and on PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hookgate import Agent, ScriptedLLM
from hookgate.engines.react import ReActEngine
from hookgate.hooks.services import HookServices
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest
from hookgate.storage.database import Database
from tests.external.test_differential import (
    BOT,
    RAN,
    Person,
    crm__lookup,
    generated,
    oa__purchase_pay,
    on_api,
)
from tests.live_server import LiveServer, live_server

pytestmark = pytest.mark.both_databases

AGENT = "twin"
POLICIES = """\
@id("lookups")
permit(principal, action == Action::"crm__lookup", resource);

@id("few-results")
@reason("at most 5 results per lookup")
forbid(principal, action == Action::"crm__lookup", resource)
when { context.args has limit && context.args.limit > 5 };

@id("payments")
permit(principal, action == Action::"oa__purchase_pay", resource)
when { context.args.amount.lessThanOrEqual(decimal("1000.0")) };

@id("big-payments")
@ask("payments above 1,000 need a person")
permit(principal, action == Action::"oa__purchase_pay", resource)
when { context.args.amount.greaterThan(decimal("1000.0")) };

@id("no-evil")
@reason("no payments to evil")
forbid(principal, action == Action::"oa__purchase_pay", resource)
when { context.args.vendor == "evil" };

@id("no-refunds")
@reason("no negative payments")
forbid(principal, action == Action::"oa__purchase_pay", resource)
when { context.args.amount.lessThan(decimal("0.0")) };
"""


def cedar_twin(policies: Path) -> Agent:
    return Agent(
        id=AGENT, name="twin", instructions="You pay.", tools=[oa__purchase_pay, crm__lookup],
        org_id="acme", owner_user_id="alice", confirmation_approver_scope="agent_owner",
        model_config_json={"hooks": {"class_hooks": [
            {"name": "cedar_policy", "params": {"policies": str(policies),
                                                "default": "deny"}}]}})


@pytest.fixture
def world(database_url: str, tmp_path: Path) -> Iterator[tuple[LiveServer, Agent, str]]:
    (tmp_path / "policies").mkdir()
    (tmp_path / "policies" / "twin.cedar").write_text(POLICIES, encoding="utf-8")
    agent = cedar_twin(tmp_path / "policies")
    deployment = Deployment(
        database_url=database_url, orgs=[OrgSpec("acme", "ACME")],
        users=[UserSpec("alice", "acme", admin=True, token_sha256=token_digest("tok-alice")),
               UserSpec("bot", "acme", token_sha256=token_digest(BOT))],
        agents={AGENT: agent}, model_for=lambda _a: ScriptedLLM([{"answer": "-"}]),
        channels=[])
    with live_server(deployment) as server:
        yield server, agent, database_url


async def on_engine(db: Database, agent: Agent, name: str, arguments: dict[str, Any]
                    ) -> tuple[str, dict[str, Any] | None]:
    """The engine's decision, its Cedar hook reading the callers from the same database."""
    RAN.clear()
    person = Person()
    model = ScriptedLLM([{"tool_calls": [{"id": "call_0", "name": name, "args": arguments}]},
                         {"answer": "done"}])
    engine = ReActEngine(model, services=HookServices(approvals=person, database=db))
    await engine.run(agent, "go", user_id="bot", org_id="acme")
    if RAN:
        return "allow", RAN[0][1]
    return ("pending" if person.asked else "deny"), None


async def test_cedar_decides_the_api_and_the_engines_generated_calls_alike(
        world: tuple[LiveServer, Agent, str], attempt: Any) -> None:
    srv, agent, url = world
    db = Database(url)
    differ, seen = [], set()
    try:
        for name, arguments in generated(seed=40, count=60):
            engine = await on_engine(db, agent, name, arguments)
            api = on_api(srv, name, arguments)
            seen.add(engine[0])
            if engine != api:
                differ.append((name, arguments, engine, api))
    finally:
        await db.dispose()
    attempt.record("external: Cedar decides the guarded-call API and the engine differently",
                   bool(differ))
    assert not differ, "\n".join(map(repr, differ))
    assert seen == {"allow", "deny", "pending"}  # the generated calls reach every decision
