"""The shop the Agents SDK tests run: its tools (recording what really ran), a scripted model
making planned calls, and a buyer behind a hookgate gate. Light to import, so a second process
can play the agent too (``python -m tests.integrations.agents_sdk_shop URL SESSION FILE``:
its run stops at a payment that waits, and it stores the run's state in FILE). The SDK is
imported where it is used, so collecting a test module that imports this one does not pay
for it."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any
from uuid import uuid4

from hookgate.client import AsyncClient, AsyncGuard
from tests.integrations.scripted_agents_model import (
    message,
    scripted_model,
    tool_call,
    tool_outputs,
)
from tests.integrations.world import ALICE_TOKEN

if TYPE_CHECKING:
    from agents import Agent, FunctionTool, Model, RunResult, RunState

    from hookgate.integrations.openai_agents import HookgateGate

FRAMEWORK = "openai-agents"


class Shop:
    """The tools, and what really ran."""

    def __init__(self, *, own_approval: bool = False) -> None:
        self.paid: list[int] = []
        self.notes: list[str] = []
        #: Whether ``pay`` asks the SDK's own approval too (``needs_approval=True``).
        self.own_approval = own_approval

    def tools(self) -> list[FunctionTool]:
        from agents import function_tool

        @function_tool(needs_approval=self.own_approval)
        def pay(amount: int, to: str) -> str:
            """Pay ``amount`` to ``to``."""
            self.paid.append(amount)
            return f"paid {amount} to {to}"

        @function_tool
        def card_on_file() -> str:
            """The card the shop pays with."""
            return "card 4111 1111 1111 1111, expires 12/29"

        @function_tool
        def write_note(text: str) -> str:
            """File a note."""
            self.notes.append(text)
            return "filed"

        return [pay, card_on_file, write_note]


def calls(*planned: tuple[str, dict[str, Any]], prefix: str = "t") -> Model:
    """A model that makes the planned tool calls, one a turn (call ids ``prefix0``, ...),
    then says what it saw."""

    def turn(items: Any) -> Any:
        seen = tool_outputs(items, prefix)
        if len(seen) < len(planned):
            name, args = planned[len(seen)]
            return tool_call(name, args, f"{prefix}{len(seen)}")
        return message("saw: " + " | ".join(seen))

    return scripted_model(turn)


PAY_500 = ("pay", {"amount": 500, "to": "acme"})


async def run(agent: Agent[Any], given: str | RunState[Any]) -> RunResult:
    """The SDK's own ``Runner.run``: a new input, or a stored state resumed."""
    from agents import Runner

    return await Runner.run(agent, given)


async def stored_state(agent: Agent[Any], stored: str) -> RunState[Any]:
    """The SDK's ``RunState`` of ``agent`` from its serialised form."""
    from agents import RunState

    return await RunState.from_string(agent, stored)


def buyer(guard: AsyncGuard, shop: Shop, session: str, *planned: tuple[str, dict[str, Any]],
          agent: str = "buyer", **options: Any) -> tuple[Agent[Any], HookgateGate]:
    from agents import Agent

    from hookgate.integrations.openai_agents import HookgateGate

    gate = HookgateGate(guard, agent, session, **options)
    return gate.guard_agent(Agent(agent, model=calls(*planned), tools=shop.tools())), gate


async def waiting_payment(guard: AsyncGuard, shop: Shop) -> tuple[str, str, str]:
    """A buyer's payment that waits for a person: (session, the serialised RunState, request
    id), as a process would keep them before it exits."""
    session = uuid4().hex
    agent, gate = buyer(guard, shop, session, PAY_500)
    result = await run(agent, "pay acme")
    [waiting] = gate.pending(result)
    assert waiting.item.arguments is not None and '"amount": 500' in waiting.item.arguments
    assert shop.paid == []
    return session, result.to_state().to_string(), waiting.request_id


async def resume(guard: AsyncGuard, shop: Shop, session: str, stored: str) -> Any:
    """A new process resuming the stored run with hookgate's decisions."""
    agent, gate = buyer(guard, shop, session, PAY_500)
    state = await stored_state(agent, stored)
    assert await gate.apply_decisions(state) == []
    return (await run(agent, state)).final_output


async def _stop_at_the_payment(url: str, session: str) -> str:
    shop = Shop()
    agent, _ = buyer(AsyncClient(url, ALICE_TOKEN, framework=FRAMEWORK), shop, session, PAY_500)
    result = await run(agent, "pay acme")
    assert shop.paid == [] and result.interruptions
    return result.to_state().to_string()


if __name__ == "__main__":
    url, session, state_file = sys.argv[1:4]
    Path(state_file).write_text(asyncio.run(_stop_at_the_payment(url, session)),
                                encoding="utf-8")
