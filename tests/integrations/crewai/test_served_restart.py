"""A CrewAI crew whose gated payment long-polls a real `hookgate serve` (SQLite, then
PostgreSQL) that is SIGKILLed while it waits: the cut long-poll blocks the call and tells the
model why, nothing is paid while hookgate is down, and once hookgate is back the payment runs
exactly once, after a person approves it. Runs in CrewAI's own environment
(scripts/crewai_env.sh)."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator

import pytest

pytest.importorskip("crewai", reason="CrewAI is not installed here: its tests run in their own "
                                     "environment (bash scripts/crewai_env.sh), because CrewAI "
                                     "pins mcp<2")
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

from crewai import Agent, Crew, Task
from crewai.tools import tool

from hookgate.integrations.crewai import HookgateToolHooks
from tests.instances import Instance
from tests.integrations.conftest import Served
from tests.integrations.crewai.scripted_llm import ScriptedLLM, act, answer
from tests.integrations.served_process import WatchedClient, pending_request, served_process
from tests.integrations.world import ALICE_TOKEN

#: 500 is above the buyer's limit of 100: a person decides.
PAY = act("pay", {"amount": 500, "to": "ACME"})


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def hookgate_serve(request: pytest.FixtureRequest,
                   tmp_path_factory: pytest.TempPathFactory) -> Iterator[Instance]:
    with served_process(request, tmp_path_factory) as server:
        yield server


#: The model's retry names the payee in full (CrewAI itself stops a tool call repeated with
#: the very same input before any hook hears of it).
PAY_AGAIN = act("pay", {"amount": 500, "to": "ACME Ltd"})


class Retrying:
    """The model's next step after a blocked call: it says it is thinking, and answers (pay
    again) only once the test lets it."""

    def __init__(self) -> None:
        self.thinking, self.go_on = threading.Event(), threading.Event()

    def __call__(self) -> str:
        self.thinking.set()
        assert self.go_on.wait(60), "the test never let the model go on"
        return PAY_AGAIN


def test_a_crewai_payment_waiting_while_hookgate_restarts_runs_once_after_the_approval(
        hookgate_serve: Instance) -> None:
    paid: list[int] = []

    @tool("pay")
    def pay(amount: int, to: str) -> str:
        """Pay `amount` euros to `to`."""
        paid.append(amount)
        return f"paid {amount} to {to}"

    retrying = Retrying()
    llm = ScriptedLLM([PAY, retrying, answer()])
    buyer = Agent(role="buyer", goal="pay", backstory="-", llm=llm, tools=[pay], max_iter=4)
    guard = WatchedClient(hookgate_serve.url, ALICE_TOKEN, framework="crewai")
    hooks = HookgateToolHooks(guard, agent="buyer", wait_s=60)

    def kickoff() -> None:
        with hooks.installed():
            Crew(agents=[buyer], tasks=[Task(description="pay ACME", expected_output="-",
                                             agent=buyer)]).kickoff()

    crew = threading.Thread(target=kickoff)
    crew.start()
    try:
        assert guard.polling.wait(30)  # the hooks long-poll hookgate for a decision
        orphaned = pending_request(hookgate_serve.url, "pay")
        hookgate_serve.kill()
        # The cut long-poll is the client's GuardUnavailable: the call is blocked and the
        # model reads why.
        assert retrying.thinking.wait(30)
        assert paid == [] and "unreachable" in llm.observations()[0]

        hookgate_serve.spawn()
        hookgate_serve.wait_up()
        inbox = Served(hookgate_serve.url)
        # The blocked call's request, approved late, runs nothing: that call is over.
        inbox.decide(orphaned, "approve")
        retrying.go_on.set()
        asked = pending_request(hookgate_serve.url, "pay")  # the model's new call asks anew
        assert asked != orphaned
        inbox.decide(asked, "approve")
    finally:
        retrying.go_on.set()
        crew.join(60)
        guard.close()
    assert not crew.is_alive()
    assert paid == [500]
    assert llm.observations()[1].startswith("paid 500 to ACME Ltd")
