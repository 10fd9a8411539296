"""CrewAI crews guarded by hookgate through HookgateToolHooks: a real Crew driven by a scripted
model, against a real hookgate server (remote, over /api/v1) and in process (LocalGuard on a
configuration file). Runs in CrewAI's own environment (scripts/crewai_env.sh): CrewAI pins
mcp<2, which hookgate's MCP gateway cannot use."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

pytest.importorskip("crewai", reason="CrewAI is not installed here: its tests run in their own "
                                     "environment (bash scripts/crewai_env.sh), because CrewAI "
                                     "pins mcp<2")
os.environ.setdefault("CREWAI_DISABLE_TELEMETRY", "true")
os.environ.setdefault("OTEL_SDK_DISABLED", "true")

from crewai import Agent, Crew, Task
from crewai.tools import tool

from hookgate.client import Client, Guard
from hookgate.client.local import LocalGuard
from hookgate.integrations.crewai import HookgateToolHooks
from tests.integrations.crewai.scripted_llm import ScriptedLLM, act, answer, native_call
from tests.integrations.scene import (
    CARD,
    HOUSE_RULES,
    TOKEN,
    audit_rows,
    decide,
    pending_request,
    write_config,
)
from tests.live_server import LiveServer, free_port

pytestmark = pytest.mark.usefixtures("empty_inbox")


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalGuard]:
    guard = LocalGuard(write_config(tmp_path_factory.mktemp("crewai-local")),
                       framework="crewai")
    yield guard
    guard.close()


@pytest.fixture(scope="module")
def remote(srv: LiveServer) -> Iterator[Client]:
    client = Client(srv.url, TOKEN, framework="crewai")
    yield client
    client.close()


@pytest.fixture(params=["in_process", "remote"])
def guard(request: pytest.FixtureRequest) -> Guard:
    return request.getfixturevalue("local" if request.param == "in_process" else "remote")


class Shop:
    """A one-agent crew with a till, a card lookup, a notebook and a tip jar."""

    def __init__(self, steps: list[Any], *, role: str = "buyer", native: bool = False) -> None:
        self.ran: list[tuple[Any, ...]] = []
        ran = self.ran

        @tool("pay")
        def pay(amount: int, to: str) -> str:
            """Pay `amount` euros to `to`."""
            ran.append(("pay", amount, to))
            return f"paid {amount} to {to}"

        @tool("lookup_card")
        def lookup_card(customer: str) -> str:
            """The card on file for a customer."""
            ran.append(("lookup_card", customer))
            return f"{customer}: {CARD}"

        @tool("write_note")
        def write_note(text: str) -> str:
            """Keep a note."""
            ran.append(("write_note", text))
            return "kept"

        @tool("tip")
        def tip(amount: int) -> str:
            """Tip the courier."""
            ran.append(("tip", amount))
            return f"tipped {amount}"

        self.llm = ScriptedLLM(steps, native=native)
        self.agent = Agent(role=role, goal="shop", backstory="-", llm=self.llm,
                           tools=[pay, lookup_card, write_note, tip], max_iter=4)

    def kickoff(self, hooks: HookgateToolHooks) -> None:
        task = Task(description="shop", expected_output="-", agent=self.agent)
        with hooks.installed():
            Crew(agents=[self.agent], tasks=[task]).kickoff()


PAY = act("pay", {"amount": 500, "to": "ACME"})


@contextmanager
def crew_running(shop: Shop, guard: Guard) -> Iterator[None]:
    """The crew runs in a thread (its hooks long-poll hookgate) while a person decides."""
    crew = threading.Thread(target=shop.kickoff,
                            args=(HookgateToolHooks(guard, agent="buyer", wait_s=30),))
    crew.start()
    try:
        yield
    finally:
        crew.join(60)


def test_a_gated_payment_waits_for_a_person_and_runs_once_when_approved(srv, remote):
    shop = Shop([PAY, answer()])
    with crew_running(shop, remote):
        decide(srv, pending_request(srv, "pay")["id"], "approve", reason="fine")
    assert shop.ran == [("pay", 500, "ACME")]
    assert shop.llm.observations()[0].startswith("paid 500 to ACME")
    assert shop.llm.saw("approved by alice")


def test_an_approval_is_used_once_and_the_same_payment_again_asks_again(srv, remote, attempt):
    shop = Shop([PAY, PAY, answer()])
    with crew_running(shop, remote):
        first = pending_request(srv, "pay")["id"]
        decide(srv, first, "approve")
        second = pending_request(srv, "pay")["id"]  # the same payment again: a request of its own
        decide(srv, second, "reject", reason="paid already")
    attempt.record("crewai approval reused for a second identical payment",
                   got_through=len(shop.ran) > 1)
    assert second != first and shop.ran == [("pay", 500, "ACME")]
    assert "paid already" in shop.llm.observations()[1]


def test_a_rejected_payment_never_runs_and_the_model_is_told_why(srv, remote):
    shop = Shop([PAY, answer()])
    with crew_running(shop, remote):
        decide(srv, pending_request(srv, "pay")["id"], "reject", reason="not this vendor")
    assert shop.ran == []
    assert "not this vendor" in shop.llm.observations()[0]


def test_an_edited_payment_runs_with_the_edited_amount_and_the_model_is_told(srv, remote):
    shop = Shop([PAY, answer()])
    with crew_running(shop, remote):
        decide(srv, pending_request(srv, "pay")["id"], "approve",
               arguments={"amount": 50, "to": "ACME"})
    assert shop.ran == [("pay", 50, "ACME")]
    assert shop.llm.saw("amount: 500 → 50")


def test_an_undecided_payment_fails_closed_and_the_model_gets_the_request_id(guard):
    shop = Shop([PAY, answer()])
    shop.kickoff(HookgateToolHooks(guard, agent="buyer"))
    assert shop.ran == []
    [seen] = shop.llm.observations()
    assert "waits for approval in hookgate (request cr_" in seen


def test_the_model_reads_what_hookgates_session_start_hooks_add(guard):
    shop = Shop([answer()])
    shop.kickoff(HookgateToolHooks(guard, agent="buyer"))
    assert HOUSE_RULES in shop.llm.seen[0]


def test_arguments_hookgate_rewrote_are_the_ones_that_run_and_the_model_is_told(guard):
    shop = Shop([act("tip", {"amount": 50}), answer()])
    shop.kickoff(HookgateToolHooks(guard, agent="buyer"))
    assert shop.ran == [("tip", 5)]
    assert shop.llm.saw("amount: 50 → 5")


def test_a_redacted_card_reaches_the_model_and_the_raw_number_does_not(guard):
    shop = Shop([act("lookup_card", {"customer": "bo"}), answer()])
    shop.kickoff(HookgateToolHooks(guard, agent="buyer"))
    assert shop.ran == [("lookup_card", "bo")]
    assert "[card]" in shop.llm.observations()[0]
    assert not shop.llm.saw(CARD)


def test_native_tool_calls_are_guarded_the_same_way(local):
    shop = Shop([native_call("lookup_card", {"customer": "bo"}),
                 native_call("pay", {"amount": 500, "to": "ACME"}, "call_2"), "done"],
                native=True)
    shop.kickoff(HookgateToolHooks(local, agent="buyer"))
    assert shop.ran == [("lookup_card", "bo")]
    assert shop.llm.saw("bo: [card]") and not shop.llm.saw(CARD)
    assert shop.llm.saw("waits for approval in hookgate (request cr_")


def test_the_read_only_guard_blocks_a_write_of_an_agent_in_a_frozen_org(local):
    shop = Shop([act("write_note", {"text": "hi"}), answer()], role="archivist")
    shop.kickoff(HookgateToolHooks(local, agent="archivist"))
    assert shop.ran == []
    assert "read-only" in shop.llm.observations()[0].lower()


def test_audit_rows_name_crewai_as_the_framework(srv, remote):
    shop = Shop([act("lookup_card", {"customer": "cy"}), answer()])
    shop.kickoff(HookgateToolHooks(remote, agent="buyer"))
    rows = [r for r in audit_rows(srv) if r.get("tool_name") == "lookup_card"]
    # The framework header decides nothing: an undeclared tool's connector is fixed.
    assert rows and {r["connector"] for r in rows} == {"guarded_calls"}


def test_an_unreachable_hookgate_blocks_the_payment_and_says_why(attempt):
    client = Client(f"http://127.0.0.1:{free_port()}", TOKEN, framework="crewai")
    shop = Shop([PAY, answer()])
    shop.kickoff(HookgateToolHooks(client, agent="buyer"))
    attempt.record("crewai call with hookgate unreachable", got_through=bool(shop.ran))
    assert shop.ran == []
    assert "unreachable" in shop.llm.observations()[0]


def test_a_coworkers_gated_refund_is_gated_when_work_is_delegated(srv, remote, attempt):
    ran: list[int] = []

    @tool("refund")
    def refund(amount: int) -> str:
        """Refund `amount` euros."""
        ran.append(amount)
        return f"refunded {amount}"

    refunder = Agent(role="refunder", goal="refund", backstory="-", max_iter=3, tools=[refund],
                     llm=ScriptedLLM([act("refund", {"amount": 30}), answer("asked")]))
    lead = Agent(role="lead", goal="lead", backstory="-", allow_delegation=True, max_iter=3,
                 llm=ScriptedLLM([act("Delegate work to coworker", {
                     "task": "refund 30 to bo", "context": "bo's order", "coworker": "refunder"}),
                     answer()]))
    task = Task(description="refund bo", expected_output="-", agent=lead)
    with HookgateToolHooks(remote, agent="buyer").installed():
        Crew(agents=[lead, refunder], tasks=[task]).kickoff()
    attempt.record("crewai gated call through a delegated coworker", got_through=bool(ran))
    assert ran == []
    assert pending_request(srv, "refund")["payload"]["args"] == {"amount": 30}
