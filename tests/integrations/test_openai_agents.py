"""OpenAI Agents SDK agents guarded by hookgate through `HookgateGate`: the real Runner driven
by a scripted `Model`, against hookgate in process (SQLite) and a real `hookgate serve`
(SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import pytest

from hookgate.client import AsyncClient, Denied, GuardUnavailable
from hookgate.client.local import AsyncLocalGuard
from tests.adversarial_tally import TALLY
from tests.integrations.agents_sdk_shop import (
    FRAMEWORK,
    PAY_500,
    Shop,
    buyer,
    calls,
    resume,
    run,
    stored_state,
    waiting_payment,
)
from tests.integrations.conftest import Inbox, Served
from tests.integrations.scripted_agents_model import (
    message,
    scripted_model,
    tool_call,
    tool_outputs,
)
from tests.integrations.world import ALICE_TOKEN, LINEAGE, MASK
from tests.live_server import free_port

if TYPE_CHECKING:  # the SDK is imported where it is used: collecting this module is cheap
    from agents import Agent

    from hookgate.integrations.openai_agents import HookgateGate

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.asyncio(loop_scope="module")


def small_payment_clerk(gate: HookgateGate, shop: Shop) -> Agent[Any]:
    """The buyer's sub-agent, behind a gate of its own, paying 5 (which always needs a
    person when the clerk pays)."""
    from agents import Agent

    return gate.sub_gate(agent="clerk", session_id=gate.session_id + "-clerk").guard_agent(
        Agent("clerk", model=calls(("pay", {"amount": 5, "to": "acme"}), prefix="c"),
              tools=shop.tools()))


# -- in process ------------------------------------------------------------------------------


async def test_an_approved_payment_runs_once_even_when_the_stored_state_is_resumed_twice(
        local_guard: AsyncLocalGuard, inbox: Inbox) -> None:
    shop = Shop()
    session, stored, request_id = await waiting_payment(local_guard, shop)
    await inbox.decide(request_id, "approve")

    assert "paid 500 to acme" in await resume(local_guard, shop, session, stored)
    replay = await resume(local_guard, shop, session, stored)

    assert shop.paid == [500]
    assert "paid 500 to acme" in replay  # the recorded observation, not a second payment
    TALLY.record("openai-agents: resume the approved state again",
                 got_through=len(shop.paid) > 1)
    [row] = [r for r in await inbox.audit() if r["request_id"] == request_id]
    assert row["connector"] == "guarded_calls" and row["outcome"] == "ok"


async def test_a_rejected_payment_never_runs_and_the_model_hears_why(
        local_guard: AsyncLocalGuard, inbox: Inbox) -> None:
    shop = Shop()
    session, stored, request_id = await waiting_payment(local_guard, shop)
    await inbox.decide(request_id, "reject", reason="over this month's budget")

    said = await resume(local_guard, shop, session, stored)

    assert shop.paid == [] and "over this month's budget" in said


async def test_a_rejection_tells_the_model_hookgates_whole_message_not_only_the_reason(
        local_guard: AsyncLocalGuard, inbox: Inbox) -> None:
    shop = Shop()
    agent, gate = buyer(local_guard, shop, uuid4().hex, PAY_500)
    result = await run(agent, "pay acme")
    [waiting] = gate.pending(result)
    await inbox.decide(waiting.request_id, "reject", reason="over budget")
    state = result.to_state()
    assert await gate.apply_decisions(state) == []

    said = (await run(agent, state)).final_output

    told = await local_guard.wait(waiting.call, timeout=0)  # what hookgate tells the model
    assert isinstance(told, Denied) and told.reason != "over budget"
    assert shop.paid == [] and told.reason in said


async def test_an_edited_payment_runs_with_the_edited_amount_and_the_model_is_told(
        local_guard: AsyncLocalGuard, inbox: Inbox) -> None:
    shop = Shop()
    session, stored, request_id = await waiting_payment(local_guard, shop)
    await inbox.decide(request_id, "approve", arguments={"amount": 50, "to": "acme"})

    said = await resume(local_guard, shop, session, stored)

    assert shop.paid == [50]
    assert "paid 50 to acme" in said and "500" in said  # told of the edit


async def test_a_card_number_reaches_the_model_masked(local_guard: AsyncLocalGuard) -> None:
    agent, _ = buyer(local_guard, Shop(), uuid4().hex, ("card_on_file", {}))
    said = (await run(agent, "which card?")).final_output
    assert MASK in said and "4111" not in said


async def test_the_read_only_guard_blocks_a_write(local_guard: AsyncLocalGuard) -> None:
    shop = Shop()
    agent, _ = buyer(local_guard, shop, uuid4().hex, ("write_note", {"text": "x"}),
                     agent="archivist")
    said = (await run(agent, "file it")).final_output
    assert shop.notes == [] and "read-only" in said.lower()


async def test_an_agent_used_as_a_tool_has_its_gated_call_wait_for_approval(
        local_guard: AsyncLocalGuard, inbox: Inbox) -> None:
    from agents import Agent

    from hookgate.integrations.openai_agents import HookgateGate

    shop, gate = Shop(), HookgateGate(local_guard, "buyer", uuid4().hex)
    clerk = small_payment_clerk(gate, shop)
    agent = gate.guard_agent(Agent(
        "buyer", model=calls(("ask_clerk", {"input": "pay 5"})),
        tools=[clerk.as_tool(tool_name="ask_clerk", tool_description="Hand work to the clerk")]))

    result = await run(agent, "get it paid")
    [waiting] = gate.pending(result)
    assert waiting.item.name == "pay" and shop.paid == []
    TALLY.record("openai-agents: a small payment through an agent used as a tool",
                 got_through=bool(shop.paid))

    await inbox.decide(waiting.request_id, "approve")
    state = result.to_state()
    assert await gate.apply_decisions(state) == []
    said = (await run(agent, state)).final_output
    assert shop.paid == [5] and "paid 5" in said
    # The clerk's calls carry the delegation: its parent session and agent, depth 1.
    clerk_session = gate.session_id + "-clerk"
    assert {e for e in LINEAGE if e[1] == clerk_session} == {
        ("clerk", clerk_session, gate.session_id, "buyer", 1)}
    assert {e[4] for e in LINEAGE if e[1] == gate.session_id} == {0}
    # ... and so do its audit rows, hashed with them (version 4); the buyer's own do not.
    rows = await inbox.audit()
    [paid] = [r for r in rows if r["tool_name"] == "pay" and r["outcome"] == "ok"
              and r["parent_session"] == gate.session_id]
    # Version 5: an external session's row names its session and covers every field.
    assert (paid["agent_id"], paid["depth"], paid["hash_v"]) == ("clerk", 1, 5)
    asked = [r for r in rows if r["tool_name"] == "ask_clerk"]
    assert asked and all((r["depth"], r["parent_session"]) == (None, None) for r in asked)


async def test_after_a_handoff_the_next_agents_gated_call_still_waits(
        local_guard: AsyncLocalGuard, inbox: Inbox) -> None:
    from agents import Agent

    from hookgate.integrations.openai_agents import HookgateGate

    shop, gate = Shop(), HookgateGate(local_guard, "buyer", uuid4().hex)
    clerk = small_payment_clerk(gate, shop)
    agent = gate.guard_agent(Agent("buyer", model=calls(("transfer_to_clerk", {})),
                                   handoffs=[clerk]))

    result = await run(agent, "get it paid")

    [waiting] = gate.pending(result)
    assert waiting.item.name == "pay" and shop.paid == []
    handoffs = [r for r in await inbox.audit() if r["tool_name"] == "transfer_to_clerk"]
    assert [r["connector"] for r in handoffs] == ["guarded_calls"]  # the handoff was asked too
    TALLY.record("openai-agents: a small payment after a handoff", got_through=bool(shop.paid))


async def test_hookgate_unreachable_the_call_does_not_run_unless_the_adapter_opts_out() -> None:
    shop = Shop()
    async with AsyncClient(f"http://127.0.0.1:{free_port()}", ALICE_TOKEN,
                           framework=FRAMEWORK) as down:
        agent, _ = buyer(down, shop, uuid4().hex, ("pay", {"amount": 5, "to": "acme"}))
        with pytest.raises(GuardUnavailable, match="unreachable"):
            await run(agent, "pay")
        assert shop.paid == []

        agent, _ = buyer(down, shop, uuid4().hex, ("pay", {"amount": 5, "to": "acme"}),
                         fail_open=True)
        assert "paid 5" in (await run(agent, "pay")).final_output
    assert shop.paid == [5]


# -- attacks ---------------------------------------------------------------------------------


async def test_a_call_id_reused_for_other_arguments_is_refused(
        local_guard: AsyncLocalGuard) -> None:
    from hookgate.integrations.openai_agents import HookgateRefused

    shop, session = Shop(), uuid4().hex
    agent, _ = buyer(local_guard, shop, session, ("pay", {"amount": 5, "to": "acme"}))
    await run(agent, "pay 5")
    agent, _ = buyer(local_guard, shop, session, ("pay", {"amount": 90, "to": "mallory"}))
    with pytest.raises(HookgateRefused, match="already used"):
        await run(agent, "pay 90 with the same call id")
    assert shop.paid == [5]
    TALLY.record("openai-agents: re-used call id, other arguments", got_through=90 in shop.paid)


async def test_an_approval_given_in_the_sdk_alone_does_not_run_the_call(
        local_guard: AsyncLocalGuard, inbox: Inbox) -> None:
    from hookgate.integrations.openai_agents import HookgateUndecided

    shop = Shop()
    session, stored, request_id = await waiting_payment(local_guard, shop)
    agent, _ = buyer(local_guard, shop, session, PAY_500)
    state = await stored_state(agent, stored)
    for item in state.get_interruptions():
        state.approve(item)  # the SDK's own approval, hookgate not asked
    with pytest.raises(HookgateUndecided, match="apply_decisions") as stopped:
        await run(agent, state)  # the run stops: nothing runs, nothing is lost
    assert shop.paid == [] and stopped.value.request_id == request_id
    TALLY.record("openai-agents: approve in the SDK only", got_through=bool(shop.paid))
    # The stored state resumes once hookgate decided and its decisions are applied.
    await inbox.decide(request_id, "approve")
    assert "paid 500" in await resume(local_guard, shop, session, stored)
    assert shop.paid == [500]


async def test_a_nan_amount_is_refused_before_the_tool_runs(
        local_guard: AsyncLocalGuard) -> None:
    from agents import Agent, function_tool

    from hookgate.integrations.openai_agents import HookgateGate, HookgateRefused

    tipped: list[float] = []

    @function_tool
    def tip(amount: float) -> str:
        """Tip the courier."""
        tipped.append(amount)
        return "tipped"

    model = scripted_model(lambda items: tool_call("tip", {"amount": float("nan")}, "t0")
                           if not tool_outputs(items) else message("done"))
    gate = HookgateGate(local_guard, "buyer", uuid4().hex)
    # The SDK itself holds a call whose arguments it cannot validate for approval...
    result = await run(gate.guard_agent(Agent("buyer", model=model, tools=[tip])), "tip")
    assert tipped == [] and result.interruptions
    # ...and hookgate, asked about it when the resumed run reaches it, refuses arguments
    # JSON cannot carry.
    state = result.to_state()
    assert await gate.apply_decisions(state) == []
    with pytest.raises(HookgateRefused, match="amount is NaN"):
        await run(gate.guard_agent(Agent("buyer", model=model, tools=[tip])), state)
    assert tipped == []
    TALLY.record("openai-agents: NaN in the arguments", got_through=bool(tipped))


# -- against a real `hookgate serve` ---------------------------------------------------------


async def test_served_a_payment_approved_in_the_inbox_runs_once(served: Served) -> None:
    shop = Shop()
    async with served.client(FRAMEWORK) as client:
        session, stored, request_id = await waiting_payment(client, shop)
    served.decide(request_id, "approve")

    async with served.client(FRAMEWORK) as client:
        assert "paid 500" in await resume(client, shop, session, stored)
    async with served.client(FRAMEWORK) as client:
        await resume(client, shop, session, stored)
    assert shop.paid == [500]


@pytest.mark.parametrize("served", ["sqlite"], indirect=True)
async def test_served_a_state_stored_by_an_exited_process_resumes_and_runs_once(
        served: Served, tmp_path: Path) -> None:
    from hookgate.integrations.openai_agents import HookgateUndecided

    session, state_file = uuid4().hex, tmp_path / "run-state.json"
    first = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "tests.integrations.agents_sdk_shop", served.url, session,
        str(state_file), cwd=ROOT, stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    _, said = await first.communicate()
    assert first.returncode == 0, said.decode()[-2000:]
    stored = state_file.read_text(encoding="utf-8")
    async with served.client(FRAMEWORK) as client:
        agent, gate = buyer(client, Shop(), session, PAY_500)
        state = await stored_state(agent, stored)
        # This process never asked about the call: the resumed run asks, and stops.
        assert await gate.apply_decisions(state) == []
        with pytest.raises(HookgateUndecided) as stopped:
            await run(agent, state)
        state = await stored_state(agent, stored)
        [waiting] = await gate.apply_decisions(state)  # now known here
        assert waiting.request_id == stopped.value.request_id
        served.decide(waiting.request_id, "approve")

        shop = Shop()
        assert "paid 500" in await resume(client, shop, session, stored)
        assert "paid 500" in await resume(client, shop, session, stored)
    assert shop.paid == [500]


# -- the tool's own needs_approval composes with hookgate's gate -----------------------------


async def test_a_tools_own_approval_still_asks_when_hookgate_allows_the_call(
        local_guard: AsyncLocalGuard) -> None:
    shop = Shop(own_approval=True)
    agent, gate = buyer(local_guard, shop, uuid4().hex, ("pay", {"amount": 5, "to": "acme"}))

    result = await run(agent, "pay 5")

    TALLY.record("openai-agents: a tool's own needs_approval after wrapping",
                 got_through=bool(shop.paid))
    assert shop.paid == [] and [i.name for i in result.interruptions] == ["pay"]
    assert gate.pending(result) == []  # nothing waits for hookgate: the SDK's user decides
    state = result.to_state()
    assert await gate.apply_decisions(state) == []
    said = (await run(agent, state)).final_output  # not approved in the SDK: asks again
    assert shop.paid == []
    state = (await run(agent, state)).to_state()
    [item] = state.get_interruptions()
    state.approve(item)
    assert await gate.apply_decisions(state) == []
    said = (await run(agent, state)).final_output
    assert shop.paid == [5] and "paid 5" in said


@pytest.mark.parametrize("decision", ["approve", "reject"])
async def test_a_tool_with_its_own_approval_and_a_hookgate_gate_runs_only_when_both_approve(
        local_guard: AsyncLocalGuard, inbox: Inbox, decision: str) -> None:
    from hookgate.integrations.openai_agents import HookgateUndecided

    shop = Shop(own_approval=True)
    agent, gate = buyer(local_guard, shop, uuid4().hex, PAY_500)
    result = await run(agent, "pay 500")
    [item] = result.interruptions
    state = result.to_state()
    state.approve(item)  # the SDK's own approval: hookgate is asked when the call runs
    assert await gate.apply_decisions(state) == []
    with pytest.raises(HookgateUndecided) as stopped:  # hookgate's gate holds it
        await run(agent, state)
    assert shop.paid == []
    state = result.to_state()
    state.approve(item)
    [waiting] = await gate.apply_decisions(state)
    assert waiting.item.name == "pay" and waiting.request_id == stopped.value.request_id
    # Resumed again before hookgate decides, the call does not run.
    early = result.to_state()
    early.approve(item)
    assert len(await gate.apply_decisions(early)) == 1
    with pytest.raises(HookgateUndecided):
        await run(agent, early)
    assert shop.paid == []

    await inbox.decide(waiting.request_id, decision, reason="not this month")
    state = result.to_state()
    state.approve(item)
    assert await gate.apply_decisions(state) == []
    said = (await run(agent, state)).final_output
    assert shop.paid == ([500] if decision == "approve" else [])
    assert ("paid 500" if decision == "approve" else "not this month") in said


async def test_a_rejection_in_the_sdk_stands_when_hookgate_would_allow(
        local_guard: AsyncLocalGuard) -> None:
    shop = Shop(own_approval=True)
    agent, gate = buyer(local_guard, shop, uuid4().hex, ("pay", {"amount": 5, "to": "acme"}))
    result = await run(agent, "pay 5")
    state = result.to_state()
    [item] = state.get_interruptions()
    state.reject(item, rejection_message="the user said no")
    assert await gate.apply_decisions(state) == []
    said = (await run(agent, state)).final_output
    assert shop.paid == [] and "the user said no" in said


# -- apply_decisions never starts a call; a resumed call starts when its tool runs -----------

PAY_5 = ("pay", {"amount": 5, "to": "acme"})


async def _approved_in_the_sdk(guard: Any, session: str) -> str:
    """A tool with its own approval, hookgate allowing it: the SDK's user approves, the app
    applies hookgate's decisions, and the state is stored (the process then exits)."""
    agent, gate = buyer(guard, Shop(own_approval=True), session, PAY_5)
    result = await run(agent, "pay 5")
    state = result.to_state()
    [item] = state.get_interruptions()
    state.approve(item)
    assert await gate.apply_decisions(state) == []
    return state.to_string()


async def test_an_allowed_call_is_not_started_by_apply_decisions_so_another_process_runs_it(
        local_guard: AsyncLocalGuard) -> None:
    session = uuid4().hex
    stored = await _approved_in_the_sdk(local_guard, session)
    # Another process resumes the stored state.
    shop = Shop(own_approval=True)
    agent, gate = buyer(local_guard, shop, session, PAY_5)
    state = await stored_state(agent, stored)
    assert await gate.apply_decisions(state) == []
    said = (await run(agent, state)).final_output
    TALLY.record("openai-agents: an allowed call lost after apply_decisions and an exit",
                 got_through=shop.paid != [5])
    assert shop.paid == [5] and "paid 5" in said
    # Resumed again: hookgate answers with what it recorded, the tool does not run again.
    again = await stored_state(agent, stored)
    await gate.apply_decisions(again)
    assert "paid 5" in (await run(agent, again)).final_output
    assert shop.paid == [5]


async def test_served_an_allowed_call_is_not_started_by_apply_decisions(served: Served) -> None:
    session = uuid4().hex
    async with served.client(FRAMEWORK) as client:
        stored = await _approved_in_the_sdk(client, session)
    shop = Shop(own_approval=True)
    async with served.client(FRAMEWORK) as client:
        agent, gate = buyer(client, shop, session, PAY_5)
        state = await stored_state(agent, stored)
        assert await gate.apply_decisions(state) == []
        assert "paid 5" in (await run(agent, state)).final_output
    assert shop.paid == [5]


async def test_a_decision_applied_by_a_process_that_then_exits_is_not_lost(
        local_guard: AsyncLocalGuard, inbox: Inbox) -> None:
    session, stored, request_id = await waiting_payment(local_guard, Shop())
    await inbox.decide(request_id, "approve")
    # A process applies the decision to the stored state and exits before it resumes.
    agent, gate = buyer(local_guard, Shop(), session, PAY_500)
    assert await gate.apply_decisions(await stored_state(agent, stored)) == []
    shop = Shop()
    assert "paid 500" in await resume(local_guard, shop, session, stored)
    TALLY.record("openai-agents: a decision applied by a process that then exits",
                 got_through=shop.paid != [500])
    assert shop.paid == [500]


async def test_a_call_waiting_for_a_person_never_runs_unguarded_even_when_the_gate_fails_open(
        local_guard: AsyncLocalGuard) -> None:
    session, stored, _ = await waiting_payment(local_guard, Shop())
    shop = Shop()
    async with AsyncClient(f"http://127.0.0.1:{free_port()}", ALICE_TOKEN,
                           framework=FRAMEWORK) as down:
        agent, gate = buyer(down, shop, session, PAY_500, fail_open=True)
        state = await stored_state(agent, stored)
        await gate.apply_decisions(state)
        with pytest.raises(GuardUnavailable, match="unreachable"):
            await run(agent, state)
    TALLY.record("openai-agents: a waiting call resumed with hookgate down, fail_open",
                 got_through=bool(shop.paid))
    assert shop.paid == []
