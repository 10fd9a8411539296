"""The in-process guard answers like a server: an ungated call is allowed once and reported,
a gated one is pending until a person decides (learnt without starting it), then runs once;
an unknown agent is refused and a configuration that cannot load fails closed."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from hookgate import Agent, ScriptedLLM
from hookgate.approvals.eligibility import Approver
from hookgate.client import (
    Allowed,
    AlreadyRan,
    Decided,
    GuardRefused,
    GuardUnavailable,
    Pending,
)
from hookgate.client.local import AsyncLocalGuard
from hookgate.runtime.deployment import Deployment, OrgSpec, UserSpec, token_digest
from hookgate.runtime.runtime import Runtime


def payer_deployment(folder: Path) -> Deployment:
    """The outside agent ``payer`` (audit log; ``transfer`` needs a person) on a SQLite file
    in ``folder``; ``alice`` decides (token ``a``), ``bot`` calls (token ``b``)."""
    agent = Agent(id="payer", name="payer", instructions="", tools=[], org_id="acme",
                  owner_user_id="alice", confirmation_approver_scope="agent_owner",
                  model_config_json={
                      "hooks": {"class_hooks": ["audit_log"]},
                      "guarded_calls": {"rules": [{"matcher": "transfer",
                                                   "requires_confirmation": True}]}})
    return Deployment(
        database_url=f"sqlite+aiosqlite:///{folder / 'hookgate.db'}",
        orgs=[OrgSpec("acme", "ACME")],
        users=[UserSpec("alice", "acme", admin=True, token_sha256=token_digest("a")),
               UserSpec("bot", "acme", token_sha256=token_digest("b"))],
        agents={"payer": agent}, model_for=lambda _a: ScriptedLLM([{"answer": "-"}]),
        channels=[])


@pytest.fixture
async def runtime(tmp_path: Path) -> AsyncIterator[Runtime]:
    rt = Runtime(payer_deployment(tmp_path))
    yield rt
    await rt.stop()


async def test_the_in_process_guard_allows_once_and_waits_for_a_person(
        runtime: Runtime) -> None:
    guard = AsyncLocalGuard(runtime, framework="crewai", user="bot")
    plain = await guard.before_call(agent="payer", session_id="s", call_id="c1",
                                    tool="search", arguments={"q": "x"})
    assert isinstance(plain, Allowed)
    assert (await guard.report(plain.call, output=[1, 2])).text == "[1, 2]"
    assert await guard.before_call(agent="payer", session_id="s", call_id="c1",
                                   tool="search", arguments={"q": "x"}) == AlreadyRan(
        plain.call, "[1, 2]")
    gated = await guard.before_call(agent="payer", session_id="s", call_id="c2",
                                    tool="transfer", arguments={"amount": 5})
    assert isinstance(gated, Pending)
    assert await guard.decision(gated.call, timeout=0) == gated
    await runtime.approvals.decide(gated.request_id, "approve", Approver("alice", "acme"))
    assert await guard.decision(gated.call, timeout=5) == Decided(
        gated.call, gated.request_id, True, None, {"amount": 5})
    allowed = await guard.wait(gated.call, timeout=5)
    assert isinstance(allowed, Allowed) and allowed.note and "by alice" in allowed.note
    assert isinstance(await guard.wait(gated.call, timeout=0), AlreadyRan)


async def test_an_unknown_agent_is_refused_and_a_bad_configuration_fails_closed(
        runtime: Runtime, tmp_path: Path) -> None:
    with pytest.raises(GuardRefused, match="no agent 'nobody'"):
        await AsyncLocalGuard(runtime, framework="adk").start_session(agent="nobody",
                                                                      session_id="s")
    broken = tmp_path / "broken.yaml"
    broken.write_text("agents: [oops\n")
    with pytest.raises(GuardUnavailable, match="configuration"):
        await AsyncLocalGuard(broken, framework="adk").before_call(
            agent="payer", session_id="s", call_id="c", tool="t", arguments={})


@pytest.mark.parametrize("arguments", [{1: "one"}, {"tags": {"a"}}, {"x": float("nan")},
                                       [("amount", 5)]])
async def test_the_in_process_guard_refuses_arguments_that_are_not_a_json_object(
        runtime: Runtime, arguments: Any) -> None:
    guard = AsyncLocalGuard(runtime, framework="crewai", user="bot")
    with pytest.raises(GuardRefused, match="arguments"):
        await guard.before_call(agent="payer", session_id="s", call_id="c9", tool="search",
                                arguments=arguments)
