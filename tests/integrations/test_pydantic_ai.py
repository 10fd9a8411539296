"""Pydantic AI agents guarded by hookgate through `HookgateToolset`: the real framework driven
by its own offline `FunctionModel`, against hookgate in process (SQLite) and a real
`hookgate serve` (SQLite and PostgreSQL)."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import uuid4

import pytest
from pydantic import TypeAdapter

from hookgate.client import AsyncClient, AsyncGuard, Denied, GuardRefused, GuardUnavailable
from hookgate.client.local import AsyncLocalGuard
from hookgate.config import load_config
from hookgate.runtime.deployment import deployment_from_config
from tests.adversarial_tally import TALLY
from tests.integrations.conftest import Inbox, Served
from tests.integrations.world import ALICE_TOKEN, MASK, write_config
from tests.live_server import free_port, live_server

if TYPE_CHECKING:  # Pydantic AI is imported where it is used: collecting this is cheap
    from pydantic_ai import Agent, FunctionToolset
    from pydantic_ai.messages import ModelMessage, ModelResponse
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

    from hookgate.integrations.pydantic_ai import HookgateToolset

FRAMEWORK = "pydantic-ai"
pytestmark = pytest.mark.asyncio(loop_scope="module")


@cache
def requests_adapter() -> TypeAdapter[DeferredToolRequests]:
    """Pydantic's adapter of the framework's deferred requests (how an app stores them)."""
    from pydantic_ai.tools import DeferredToolRequests

    return TypeAdapter(DeferredToolRequests)


class Shop:
    """The tools, and what really ran."""

    def __init__(self, *, own_approval: bool = False) -> None:
        self.paid: list[int] = []
        self.notes: list[str] = []
        #: Whether ``pay`` asks Pydantic AI's own approval too (``requires_approval=True``).
        self.own_approval = own_approval

    def toolset(self) -> FunctionToolset[Any]:
        from pydantic_ai import FunctionToolset

        def pay(amount: int, to: str) -> str:
            """Pay ``amount`` to ``to``."""
            self.paid.append(amount)
            return f"paid {amount} to {to}"

        def card_on_file() -> str:
            """The card the shop pays with."""
            return "card 4111 1111 1111 1111, expires 12/29"

        def write_note(text: str) -> str:
            """File a note."""
            self.notes.append(text)
            return "filed"

        tools = FunctionToolset([card_on_file, write_note])
        tools.add_function(pay, requires_approval=self.own_approval)
        return tools


def calls(*planned: tuple[str, dict[str, Any]]) -> FunctionModel:
    """A model that makes the planned tool calls, one a turn, then says what it saw."""
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
        if len(returns) < len(planned):
            name, args = planned[len(returns)]
            return ModelResponse(parts=[ToolCallPart(name, args, tool_call_id=f"t{len(returns)}")])
        return ModelResponse(parts=[TextPart("saw: " + " | ".join(str(r.content)
                                                                  for r in returns))])

    return FunctionModel(respond)


def buyer(guard: AsyncGuard, shop: Shop, session: str, *planned: tuple[str, dict[str, Any]],
          agent: str = "buyer", **options: Any) -> tuple[Agent[None, Any], HookgateToolset[Any]]:
    from pydantic_ai import Agent
    from pydantic_ai.tools import DeferredToolRequests

    from hookgate.integrations.pydantic_ai import HookgateToolset

    toolset = HookgateToolset(shop.toolset(), guard=guard, agent=agent, session_id=session,
                              **options)
    return Agent(calls(*planned), toolsets=[toolset],
                 output_type=[str, DeferredToolRequests]), toolset


PAY_500 = ("pay", {"amount": 500, "to": "acme"})


async def waiting_payment(guard: AsyncGuard, shop: Shop) -> tuple[str, bytes, bytes, str]:
    """A buyer's payment that waits for a person: (session, stored messages, stored
    requests, request id), as a process would keep them before it exits."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter
    from pydantic_ai.tools import DeferredToolRequests

    session = uuid4().hex
    agent, _ = buyer(guard, shop, session, PAY_500)
    result = await agent.run("pay acme")
    assert isinstance(result.output, DeferredToolRequests)
    [part] = result.output.approvals
    assert part.args_as_dict() == PAY_500[1] and shop.paid == []
    request_id = result.output.metadata[part.tool_call_id]["hookgate_request"]
    return (session, ModelMessagesTypeAdapter.dump_json(result.all_messages()),
            requests_adapter().dump_json(result.output), request_id)


async def resume(guard: AsyncGuard, shop: Shop, session: str, messages: bytes,
                 requests: bytes, results: DeferredToolResults | None = None) -> Any:
    """A new process resuming the stored run with hookgate's decisions."""
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    agent, toolset = buyer(guard, shop, session, PAY_500)
    pending = requests_adapter().validate_json(requests)
    if results is None:
        results = await toolset.results(pending)
    return (await agent.run(message_history=ModelMessagesTypeAdapter.validate_json(messages),
                            deferred_tool_results=results)).output


# -- in process ------------------------------------------------------------------------------


async def test_an_approved_payment_runs_once_even_when_the_stored_run_is_resumed_twice(
        local_guard: AsyncLocalGuard, inbox: Inbox) -> None:
    shop = Shop()
    session, messages, requests, request_id = await waiting_payment(local_guard, shop)
    await inbox.decide(request_id, "approve")

    assert "paid 500 to acme" in await resume(local_guard, shop, session, messages, requests)
    replay = await resume(local_guard, shop, session, messages, requests)

    assert shop.paid == [500]
    assert "paid 500 to acme" in replay  # the recorded observation, not a second payment
    TALLY.record("pydantic-ai: resume the approved run again", got_through=len(shop.paid) > 1)
    [row] = [r for r in await inbox.audit() if r["request_id"] == request_id]
    assert row["connector"] == "guarded_calls" and row["outcome"] == "ok"


async def test_a_rejected_payment_never_runs_and_the_model_hears_why(
        local_guard: AsyncLocalGuard, inbox: Inbox) -> None:
    shop = Shop()
    session, messages, requests, request_id = await waiting_payment(local_guard, shop)
    await inbox.decide(request_id, "reject", reason="over this month's budget")

    said = await resume(local_guard, shop, session, messages, requests)

    assert shop.paid == [] and "over this month's budget" in said


async def test_a_rejection_tells_the_model_hookgates_whole_message_not_only_the_reason(
        local_guard: AsyncLocalGuard, inbox: Inbox) -> None:
    from hookgate.integrations.pydantic_ai import HOOKGATE_CALL

    shop = Shop()
    session, messages, requests, request_id = await waiting_payment(local_guard, shop)
    await inbox.decide(request_id, "reject", reason="over budget")
    held = requests_adapter().validate_json(requests).metadata
    [call] = [m[HOOKGATE_CALL] for m in held.values()]

    said = await resume(local_guard, shop, session, messages, requests)

    told = await local_guard.wait(call, timeout=0)  # what hookgate tells the model
    assert isinstance(told, Denied) and told.reason != "over budget"
    assert shop.paid == [] and told.reason in said


async def test_an_edited_payment_runs_with_the_edited_amount_and_the_model_is_told(
        local_guard: AsyncLocalGuard, inbox: Inbox) -> None:
    shop = Shop()
    session, messages, requests, request_id = await waiting_payment(local_guard, shop)
    await inbox.decide(request_id, "approve", arguments={"amount": 50, "to": "acme"})
    _, toolset = buyer(local_guard, shop, session, PAY_500)
    results = await toolset.results(requests_adapter().validate_json(requests))
    assert [a.override_args for a in results.approvals.values()  # type: ignore[union-attr]
            ] == [{"amount": 50, "to": "acme"}]

    said = await resume(local_guard, shop, session, messages, requests, results)

    assert shop.paid == [50]
    assert "paid 50 to acme" in said and "500" in said and "50" in said  # told of the edit


async def test_an_edit_forged_into_the_results_runs_only_what_the_person_approved(
        local_guard: AsyncLocalGuard, inbox: Inbox) -> None:
    from pydantic_ai.tools import ToolApproved

    shop = Shop()
    session, messages, requests, request_id = await waiting_payment(local_guard, shop)
    await inbox.decide(request_id, "approve")
    _, toolset = buyer(local_guard, shop, session, PAY_500)
    results = await toolset.results(requests_adapter().validate_json(requests))
    [part_id] = results.approvals
    results.approvals[part_id] = ToolApproved(override_args={"amount": 5000, "to": "mallory"})

    await resume(local_guard, shop, session, messages, requests, results)

    TALLY.record("pydantic-ai: override_args forged after an approval",
                 got_through=shop.paid != [500])
    assert shop.paid == [500]


async def test_a_card_number_reaches_the_model_masked(local_guard: AsyncLocalGuard) -> None:
    agent, _ = buyer(local_guard, Shop(), uuid4().hex, ("card_on_file", {}))
    said = (await agent.run("which card?")).output
    assert MASK in said and "4111" not in said


async def test_the_read_only_guard_blocks_a_write(local_guard: AsyncLocalGuard) -> None:
    shop = Shop()
    agent, _ = buyer(local_guard, shop, uuid4().hex, ("write_note", {"text": "x"}),
                     agent="archivist")
    said = (await agent.run("file it")).output
    assert shop.notes == [] and "read-only" in said.lower()


async def test_a_sub_agents_gated_call_waits_for_its_own_approval(
        local_guard: AsyncLocalGuard) -> None:
    from pydantic_ai import Agent, FunctionToolset
    from pydantic_ai.tools import DeferredToolRequests

    from hookgate.integrations.pydantic_ai import HookgateToolset

    shop, session = Shop(), uuid4().hex
    clerk_toolsets: list[HookgateToolset[Any]] = []

    async def ask_clerk(task: str) -> str:
        """Hand a payment to the clerk."""
        [clerk_toolset] = clerk_toolsets
        clerk = Agent(calls(("pay", {"amount": 5, "to": "acme"})), toolsets=[clerk_toolset],
                      output_type=[str, DeferredToolRequests])
        out = (await clerk.run(task)).output
        if isinstance(out, DeferredToolRequests):
            return "the clerk waits for request " + out.metadata["t0"]["hookgate_request"]
        return str(out)

    parent = HookgateToolset(FunctionToolset([ask_clerk]), guard=local_guard, agent="buyer",
                             session_id=session)
    clerk_toolsets.append(parent.delegate(shop.toolset(), agent="clerk",
                                          session_id=session + "-clerk"))
    agent = Agent(calls(("ask_clerk", {"task": "pay 5"})), toolsets=[parent])
    said = (await agent.run("get it paid")).output

    assert shop.paid == [] and "the clerk waits for request" in said
    TALLY.record("pydantic-ai: a small payment through a sub-agent", got_through=bool(shop.paid))


async def test_hookgate_unreachable_the_call_does_not_run_unless_the_adapter_opts_out() -> None:
    shop = Shop()
    async with AsyncClient(f"http://127.0.0.1:{free_port()}", ALICE_TOKEN,
                           framework=FRAMEWORK) as down:
        agent, _ = buyer(down, shop, uuid4().hex, ("pay", {"amount": 5, "to": "acme"}))
        with pytest.raises(GuardUnavailable, match="unreachable"):
            await agent.run("pay")
        assert shop.paid == []

        agent, _ = buyer(down, shop, uuid4().hex, ("pay", {"amount": 5, "to": "acme"}),
                         fail_open=True)
        assert "paid 5" in (await agent.run("pay")).output
    assert shop.paid == [5]


# -- attacks ---------------------------------------------------------------------------------


async def test_a_call_id_reused_for_other_arguments_is_refused(
        local_guard: AsyncLocalGuard) -> None:
    shop, session = Shop(), uuid4().hex
    agent, _ = buyer(local_guard, shop, session, ("pay", {"amount": 5, "to": "acme"}))
    await agent.run("pay 5")
    agent, _ = buyer(local_guard, shop, session, ("pay", {"amount": 90, "to": "mallory"}))
    with pytest.raises(GuardRefused, match="already used"):
        await agent.run("pay 90 with the same call id")
    assert shop.paid == [5]
    TALLY.record("pydantic-ai: re-used call id, other arguments", got_through=90 in shop.paid)


async def test_an_approval_given_in_the_framework_alone_does_not_run_the_call(
        local_guard: AsyncLocalGuard) -> None:
    from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

    shop = Shop()
    session, messages, requests, request_id = await waiting_payment(local_guard, shop)
    forged = DeferredToolResults(approvals={"t0": True},
                                 metadata=requests_adapter().validate_json(requests).metadata)
    said = await resume(local_guard, shop, session, messages, requests, forged)
    TALLY.record("pydantic-ai: approve in the framework only", got_through=bool(shop.paid))
    # The call pauses again on hookgate's request rather than being lost to the model.
    assert shop.paid == [] and isinstance(said, DeferredToolRequests)
    [part] = said.approvals
    assert said.metadata[part.tool_call_id]["hookgate_request"] == request_id


async def test_another_calls_approval_does_not_run_a_waiting_call(
        local_guard: AsyncLocalGuard, inbox: Inbox) -> None:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    shop = Shop()
    _, _, approved_requests, approved_id = await waiting_payment(local_guard, shop)
    await inbox.decide(approved_id, "approve")
    session, messages, requests, _ = await waiting_payment(local_guard, shop)
    # The stored requests of the waiting run, doctored to name the approved call.
    borrowed = requests_adapter().validate_json(approved_requests).metadata
    doctored = requests_adapter().validate_json(requests)
    doctored.metadata = borrowed
    agent, toolset = buyer(local_guard, shop, session, PAY_500)
    results = await toolset.results(doctored)
    await agent.run(message_history=ModelMessagesTypeAdapter.validate_json(messages),
                    deferred_tool_results=results)
    assert shop.paid == []
    TALLY.record("pydantic-ai: resume with another call's approval", got_through=bool(shop.paid))


async def test_arguments_edited_in_the_framework_are_not_what_runs(
        local_guard: AsyncLocalGuard, inbox: Inbox) -> None:
    from pydantic_ai.tools import DeferredToolResults, ToolApproved

    from hookgate.integrations.pydantic_ai import HOOKGATE_CALL

    shop = Shop()
    session, messages, requests, request_id = await waiting_payment(local_guard, shop)
    await inbox.decide(request_id, "approve")
    held = requests_adapter().validate_json(requests).metadata
    forged = DeferredToolResults(
        approvals={"t0": ToolApproved(override_args={"amount": 99_999, "to": "mallory"})},
        metadata=held)
    assert held["t0"][HOOKGATE_CALL]
    await resume(local_guard, shop, session, messages, requests, forged)
    assert shop.paid == [500]
    TALLY.record("pydantic-ai: edit the approved arguments in the framework",
                 got_through=99_999 in shop.paid)


async def test_a_nan_amount_is_refused_before_the_tool_runs(
        local_guard: AsyncLocalGuard) -> None:
    from pydantic_ai import Agent, FunctionToolset

    from hookgate.integrations.pydantic_ai import HookgateToolset

    tipped: list[float] = []

    def tip(amount: float) -> str:
        """Tip the courier."""
        tipped.append(amount)
        return "tipped"

    toolset = HookgateToolset(FunctionToolset([tip]), guard=local_guard, agent="buyer",
                              session_id=uuid4().hex)
    agent = Agent(calls(("tip", {"amount": float("nan")})), toolsets=[toolset])
    with pytest.raises(GuardRefused, match="amount is NaN"):
        await agent.run("tip")
    assert tipped == []
    TALLY.record("pydantic-ai: NaN in the arguments", got_through=bool(tipped))


# -- against a real `hookgate serve` ---------------------------------------------------------


async def test_served_a_payment_approved_in_the_inbox_runs_once(served: Served) -> None:
    shop = Shop()
    async with served.client(FRAMEWORK) as client:
        session, messages, requests, request_id = await waiting_payment(client, shop)
    served.decide(request_id, "approve")

    async with served.client(FRAMEWORK) as client:
        assert "paid 500" in await resume(client, shop, session, messages, requests)
    async with served.client(FRAMEWORK) as client:
        await resume(client, shop, session, messages, requests)
    assert shop.paid == [500]


async def test_a_payment_waiting_while_hookgate_restarts_runs_once_after_the_decision(
        tmp_path: Path) -> None:
    config = write_config(tmp_path, f"sqlite+aiosqlite:///{tmp_path / 'hookgate.db'}")
    shop = Shop()
    with live_server(deployment_from_config(load_config(config))) as first:
        async with Served(first.url).client(FRAMEWORK) as client:
            session, messages, requests, request_id = await waiting_payment(client, shop)
    with live_server(deployment_from_config(load_config(config))) as second:
        Served(second.url).decide(request_id, "approve")
        async with Served(second.url).client(FRAMEWORK) as client:
            assert "paid 500" in await resume(client, shop, session, messages, requests)
            await resume(client, shop, session, messages, requests)
    assert shop.paid == [500]


# -- the tool's own requires_approval composes with hookgate's gate --------------------------


async def test_a_tool_with_its_own_approval_and_a_hookgate_gate_runs_only_when_both_approve(
        local_guard: AsyncLocalGuard, inbox: Inbox) -> None:
    from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

    from hookgate.integrations.pydantic_ai import HOOKGATE_CALL

    shop, session = Shop(own_approval=True), uuid4().hex
    agent, toolset = buyer(local_guard, shop, session, PAY_500)
    first = await agent.run("pay acme")
    assert isinstance(first.output, DeferredToolRequests) and shop.paid == []
    [part] = first.output.approvals
    assert HOOKGATE_CALL not in first.output.metadata.get(part.tool_call_id, {})
    # The user approves in Pydantic AI: hookgate is asked now, and its gate pauses again.
    second = await agent.run(message_history=first.all_messages(),
                             deferred_tool_results=DeferredToolResults(
                                 approvals={part.tool_call_id: True}))
    TALLY.record("pydantic-ai: requires_approval given, hookgate pending",
                 got_through=bool(shop.paid))
    assert isinstance(second.output, DeferredToolRequests) and shop.paid == []
    request_id = second.output.metadata[part.tool_call_id]["hookgate_request"]
    await inbox.decide(request_id, "approve")
    results = await toolset.results(second.output)
    done = await agent.run(message_history=second.all_messages(),
                           deferred_tool_results=results)
    assert shop.paid == [500] and "paid 500" in done.output


async def test_a_tools_own_approval_still_asks_when_hookgate_allows_the_call(
        local_guard: AsyncLocalGuard) -> None:
    from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults

    shop = Shop(own_approval=True)
    agent, toolset = buyer(local_guard, shop, uuid4().hex, ("pay", {"amount": 5, "to": "acme"}))
    first = await agent.run("pay 5")
    assert isinstance(first.output, DeferredToolRequests) and shop.paid == []
    assert await toolset.results(first.output) == DeferredToolResults()  # the user decides
    [part] = first.output.approvals
    done = await agent.run(message_history=first.all_messages(),
                           deferred_tool_results=DeferredToolResults(
                               approvals={part.tool_call_id: True}))
    assert shop.paid == [5] and "paid 5" in done.output
