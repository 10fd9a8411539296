"""A run that parks at a person's approval returns what it waits for, not an exception."""

from __future__ import annotations

from hookgate import Agent, HookContext, HookResult, PreToolUseHook, ScriptedLLM, tool
from hookgate.engines import DelegatingReActEngine
from hookgate.engines.interrupts import RunParked
from hookgate.engines.result import PendingApproval
from hookgate.hooks.registry import HookRegistry
from hookgate.hooks.withheld import MASK
from hookgate.tools.ledger import InMemoryLedger


class AsksAPerson(PreToolUseHook):
    """Announces a pending request (as the gate does on the run queue) and parks the run."""

    name = "asks_a_person"

    async def execute(self, ctx: HookContext) -> HookResult:
        assert ctx.emit is not None
        ctx.emit("confirmation_pending", {
            "request_id": "cr_1", "tool_call_id": ctx.metadata["tool_call_id"],
            "tool_name": ctx.tool_name, "args": dict(ctx.tool_args), "mode": "inline",
            "channel_id": None, "approver_scope": "agent_owner",
            "expires_at": "2026-01-01T00:00:00+00:00", "resumed": False})
        raise RunParked("cr_1")


async def test_a_parked_run_says_which_call_waits_for_whom_with_secrets_masked() -> None:
    @tool(requires_confirmation=True)
    async def oa__login(user: str, password: str) -> str:
        return "in"

    agent = Agent(id="ops", name="Ops", instructions="", tools=[oa__login], org_id="acme")
    llm = ScriptedLLM([{"tool_calls": [{"name": "oa__login", "id": "c1",
                                        "args": {"user": "bob", "password": "hunter2"}}]},
                       {"answer": "done"}])
    engine = DelegatingReActEngine(llm, ledger=InMemoryLedger(),
                                   registries=lambda agent, services: HookRegistry(
                                       [AsksAPerson()]))
    result = await engine.run(agent, "log in", user_id="alice")

    assert result.status == "awaiting_approval"
    assert result.pending == [PendingApproval(
        request_id="cr_1", tool_call_id="c1", tool_name="oa__login",
        args={"user": "bob", "password": MASK}, approver_scope="agent_owner",
        expires_at="2026-01-01T00:00:00+00:00")]
