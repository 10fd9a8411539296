"""Google ADK agents guarded by hookgate through HookgatePlugin: a real ADK Runner driven by a
scripted model, against a real hookgate server (remote, over /api/v1) and in process (the
library over the same runtime). A person decides in the inbox over HTTP."""

from __future__ import annotations

import asyncio
import importlib.util
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pytest

# ADK is imported where it is used (collecting this module does not pay for it); without it
# installed, the module is skipped as pytest.importorskip would.
if importlib.util.find_spec("google.adk") is None:
    pytest.skip("google-adk is not installed (pip install 'hookgate[adk]')",
                allow_module_level=True)

from hookgate.client import AsyncClient, AsyncGuard
from hookgate.client.local import AsyncLocalGuard
from tests.integrations.adk.scripted_model import Turn, scripted_model
from tests.integrations.scene import (
    CARD,
    HOUSE_RULES,
    TOKEN,
    audit_rows,
    decide,
    pending_request,
)
from tests.live_server import LiveServer, free_port

if TYPE_CHECKING:
    from google.adk.events import Event
    from google.genai import types

    from hookgate.integrations.adk import PendingCall

pytestmark = pytest.mark.usefixtures("empty_inbox")


@pytest.fixture
def make_guard(srv: LiveServer) -> Iterator[Callable[[str], AsyncGuard]]:
    """A guard over the test server: "remote" (its /api/v1) or "in_process" (its runtime)."""
    clients: list[AsyncClient] = []

    def make(kind: str, url: str | None = None) -> AsyncGuard:
        if kind == "in_process":
            return AsyncLocalGuard(srv.runtime, framework="adk")
        clients.append(AsyncClient(url or srv.url, TOKEN, framework="adk"))
        return clients[-1]

    yield make
    for client in clients:
        srv.call(client.aclose())


@pytest.fixture(params=["in_process", "remote"])
def guard(request: pytest.FixtureRequest, make_guard: Callable[[str], AsyncGuard]
          ) -> AsyncGuard:
    return make_guard(request.param)


@dataclass
class Shop:
    """An ADK agent with a till, a card lookup, a notebook and a refunds sub-agent."""

    srv: LiveServer
    guard: AsyncGuard
    turns: list[Turn]
    agent_id: str = "buyer"
    sub_turns: list[Turn] = field(default_factory=list)
    wait_s: float = 0.0
    include_plugins: bool = True
    transfer: bool = False  # the refunder is a sub-agent (transfer), not an AgentTool
    agents: dict[str, str] = field(default_factory=dict)  # ADK agent name -> hookgate agent
    sessions: str | None = None  # a database for ADK's sessions (default: in memory)
    session_id: str | None = None
    ran: list[tuple[Any, ...]] = field(default_factory=list)
    #: ``pay`` and ``tip`` ask ADK's own tool confirmation too (require_confirmation=True).
    own_confirmation: bool = False

    def __post_init__(self) -> None:
        from google.adk.agents import LlmAgent
        from google.adk.apps import App
        from google.adk.runners import InMemoryRunner, Runner
        from google.adk.sessions import DatabaseSessionService
        from google.adk.tools.agent_tool import AgentTool
        from google.adk.tools.function_tool import FunctionTool

        from hookgate.integrations.adk import HookgatePlugin

        ran = self.ran

        def pay(amount: int, to: str) -> dict[str, Any]:
            """Pay ``amount`` euros to ``to``."""
            ran.append(("pay", amount, to))
            return {"paid": amount, "to": to}

        def lookup_card(customer: str) -> dict[str, Any]:
            """The card on file for a customer."""
            ran.append(("lookup_card", customer))
            return {"customer": customer, "card": CARD}

        def write_note(text: str) -> dict[str, Any]:
            """Keep a note."""
            ran.append(("write_note", text))
            return {"kept": text}

        def tip(amount: int) -> dict[str, Any]:
            """Tip the courier."""
            ran.append(("tip", amount))
            return {"tipped": amount}

        def charge(card: str) -> dict[str, Any]:
            """Charge a card."""
            ran.append(("charge", card))
            raise ConnectionError("the gateway is down")

        def refund(amount: int) -> dict[str, Any]:
            """Refund ``amount`` euros."""
            ran.append(("refund", amount))
            return {"refunded": amount}

        self.model = scripted_model(list(self.turns))
        self.sub_model = scripted_model(list(self.sub_turns))
        refunder = LlmAgent(name="refunder", model=self.sub_model, tools=[refund],
                            description="Refunds customers.")
        tools: list[Any] = [pay, lookup_card, write_note, tip, charge]
        if self.own_confirmation:
            tools[0] = FunctionTool(pay, require_confirmation=True)
            tools[3] = FunctionTool(tip, require_confirmation=True)
        if not self.transfer:
            tools.append(AgentTool(refunder, include_plugins=self.include_plugins))
        agent = LlmAgent(name="shop", model=self.model, tools=tools,
                         sub_agents=[refunder] if self.transfer else [])
        app = App(name="shop", root_agent=agent, plugins=[
            HookgatePlugin(self.guard, agent=self.agent_id, agents=self.agents,
                           wait_s=self.wait_s)])
        self.runner = InMemoryRunner(app=app) if self.sessions is None else Runner(
            app=app, session_service=DatabaseSessionService(self.sessions))

    async def _send(self, message: types.Content) -> list[Event]:
        if self.session_id is None:
            session = await self.runner.session_service.create_session(
                app_name=self.runner.app_name, user_id="alice")
            self.session_id = session.id
        return [event async for event in self.runner.run_async(
            user_id="alice", session_id=self.session_id, new_message=message)]

    def say(self, text: str = "go") -> list[Event]:
        return self.srv.call(self._send(user_says(text)))

    def resume(self, pending: list[PendingCall]) -> list[Event]:
        from hookgate.integrations.adk import confirmation_replies

        return self.srv.call(self._send(confirmation_replies(pending)))

    def confirm_own(self, events: list[Event], confirmed: bool = True) -> list[Event]:
        """The user answers the tools' own confirmations (not hookgate's) in ``events``."""
        from google.genai import types

        asked = [call for event in events for call in event.get_function_calls()
                 if call.name == "adk_request_confirmation" and "hookgate_request_id" not in
                 str((call.args or {}).get("toolConfirmation"))]
        assert asked, "no confirmation of the tool's own was asked"
        return self.srv.call(self._send(types.Content(role="user", parts=[
            types.Part(function_response=types.FunctionResponse(
                name="adk_request_confirmation", id=call.id,
                response={"confirmed": confirmed})) for call in asked])))


def pending_calls(events: list[Event]) -> list[PendingCall]:
    """hookgate's calls waiting for a person in ``events`` (the adapter's own reading)."""
    from hookgate.integrations.adk import pending_calls

    return pending_calls(events)


def user_says(text: str) -> types.Content:
    from google.genai import types

    return types.Content(role="user", parts=[types.Part(text=text)])


PAY = ("pay", {"amount": 500, "to": "ACME"})
TRANSFER = ("transfer_to_agent", {"agent_name": "refunder"})


def test_a_gated_payment_pauses_in_adk_and_runs_once_after_approval(srv, guard, attempt):
    shop = Shop(srv, guard, [[PAY], "paid", "again"])
    [paused] = pending_calls(shop.say())
    assert shop.ran == []
    assert paused.tool == "pay" and paused.arguments == {"amount": 500, "to": "ACME"}
    assert pending_request(srv, "pay")["id"] == paused.request_id

    decide(srv, paused.request_id, "approve", reason="fine")
    shop.resume([paused])
    assert shop.ran == [("pay", 500, "ACME")]
    [result] = shop.model.results()
    assert '"paid": 500' in result["result"] and "approved by alice" in result["note"]

    # The same confirmation sent again: hookgate says the call already ran.
    shop.resume([paused])
    attempt.record("adk confirmation replayed after approval", got_through=len(shop.ran) > 1)
    assert shop.ran == [("pay", 500, "ACME")]


def test_the_model_reads_what_hookgates_session_start_hooks_add(srv, make_guard):
    shop = Shop(srv, make_guard("remote"), ["hello"])
    shop.say()
    assert HOUSE_RULES in str(shop.model.requests[0].config.system_instruction)


def test_a_pause_outlives_the_agents_process_and_the_payment_runs_once(srv, make_guard,
                                                                        tmp_path):
    guard = make_guard("remote")
    stored = f"sqlite+aiosqlite:///{tmp_path / 'adk-sessions.db'}"
    first = Shop(srv, guard, [[PAY]], sessions=stored)
    [paused] = pending_calls(first.say())
    decide(srv, paused.request_id, "approve")
    # Another process: a new model, plugin and runner over the same stored ADK session.
    second = Shop(srv, guard, ["paid"], sessions=stored, session_id=first.session_id)
    second.resume([paused])
    for shop in (first, second):
        srv.call(shop.runner.session_service.close())  # type: ignore[attr-defined]
    assert first.ran == [] and second.ran == [("pay", 500, "ACME")]


def test_a_rejected_payment_never_runs_and_the_model_is_told_why(srv, guard):
    shop = Shop(srv, guard, [[PAY], "ok"])
    [paused] = pending_calls(shop.say())
    decide(srv, paused.request_id, "reject", reason="not this vendor")
    shop.resume([paused])
    assert shop.ran == []
    [result] = shop.model.results()
    assert "not this vendor" in result["error"]


def test_an_edited_payment_runs_with_the_edited_amount_and_the_model_is_told(srv, guard):
    shop = Shop(srv, guard, [[PAY], "ok"])
    [paused] = pending_calls(shop.say())
    decide(srv, paused.request_id, "approve", arguments={"amount": 50, "to": "ACME"})
    shop.resume([paused])
    assert shop.ran == [("pay", 50, "ACME")]
    [result] = shop.model.results()
    assert "amount: 500 → 50" in result["note"]


def test_arguments_hookgate_rewrote_are_the_ones_that_run_and_the_model_is_told(srv, guard):
    shop = Shop(srv, guard, [[("tip", {"amount": 50})], "ok"])
    shop.say()
    assert shop.ran == [("tip", 5)]
    [result] = shop.model.results()
    assert "amount: 50 → 5" in result["note"]


def test_a_waiting_payment_long_polls_and_runs_when_a_person_approves(srv, make_guard):
    shop = Shop(srv, make_guard("remote"), [[PAY], "ok"], wait_s=20)
    running = asyncio.run_coroutine_threadsafe(shop._send(user_says("go")), srv.server_loop)
    decide(srv, pending_request(srv, "pay")["id"], "approve")
    assert pending_calls(running.result(30)) == []
    assert shop.ran == [("pay", 500, "ACME")]


def test_a_redacted_card_reaches_the_model_and_the_raw_number_does_not(srv, guard):
    shop = Shop(srv, guard, [[("lookup_card", {"customer": "bo"})], "ok"])
    shop.say()
    assert shop.ran == [("lookup_card", "bo")]
    [result] = shop.model.results()
    assert "[card]" in result["result"]
    assert not shop.model.saw(CARD)


def test_a_failing_tool_is_reported_and_the_model_reads_hookgates_observation(srv,
                                                                              make_guard):
    shop = Shop(srv, make_guard("in_process"), [[("charge", {"card": "on file"})], "ok"])
    shop.say()
    assert shop.ran == [("charge", "on file")]
    assert shop.model.results()[0] == {"error": "Error: ConnectionError: the gateway is down"}
    rows = [r for r in audit_rows(srv) if r.get("tool_name") == "charge"]
    assert [r["outcome"] for r in rows] == ["error"]


def test_the_read_only_guard_blocks_a_write_of_an_agent_in_a_frozen_org(srv, make_guard):
    shop = Shop(srv, make_guard("in_process"), [[("write_note", {"text": "hi"})], "ok"],
                agent_id="archivist")
    shop.say()
    assert shop.ran == []
    [result] = shop.model.results()
    assert "read-only" in result["error"].lower()


def test_audit_rows_name_adk_as_the_framework(srv, make_guard):
    shop = Shop(srv, make_guard("remote"), [[("lookup_card", {"customer": "cy"})], "ok"])
    shop.say()
    rows = [r for r in audit_rows(srv) if r.get("tool_name") == "lookup_card"]
    # The framework header decides nothing: an undeclared tool's connector is fixed.
    assert rows and {r["connector"] for r in rows} == {"guarded_calls"}


def test_an_unreachable_hookgate_stops_the_run_and_the_payment_does_not_happen(srv, make_guard):
    shop = Shop(srv, make_guard("remote", f"http://127.0.0.1:{free_port()}"), [[PAY], "ok"])
    with pytest.raises(RuntimeError, match="unreachable"):
        shop.say()
    assert shop.ran == []


def test_a_sub_agents_gated_refund_is_gated(srv, guard):
    shop = Shop(srv, guard, [[("refunder", {"request": "refund 30"})], "ok"],
                sub_turns=[[("refund", {"amount": 30})], "asked"])
    shop.say()
    assert shop.ran == []
    request = pending_request(srv, "refund")
    assert request["payload"]["args"] == {"amount": 30}


def test_a_transferred_sub_agents_gated_refund_is_gated(srv, guard):
    shop = Shop(srv, guard, [[TRANSFER]],
                sub_turns=[[("refund", {"amount": 40})], "asked"], transfer=True)
    [paused] = pending_calls(shop.say())
    assert shop.ran == [] and paused.tool == "refund"
    assert pending_request(srv, "refund")["id"] == paused.request_id


def test_a_sub_agent_mapped_to_another_hookgate_agent_follows_that_agents_rules(srv,
                                                                               make_guard):
    # The refunder is hookgate's archivist here, whose org is read-only.
    shop = Shop(srv, make_guard("in_process"), [[TRANSFER]],
                sub_turns=[[("refund", {"amount": 40})], "asked"], transfer=True,
                agents={"refunder": "archivist"})
    shop.say()
    assert shop.ran == []
    assert "read-only" in shop.sub_model.results()[-1]["error"].lower()


def test_a_sub_agent_that_would_run_without_the_plugin_is_not_started(srv, make_guard, attempt):
    shop = Shop(srv, make_guard("in_process"),
                [[("refunder", {"request": "refund 30"})], "ok"],
                sub_turns=[[("refund", {"amount": 30})], "asked"], include_plugins=False)
    shop.say()
    attempt.record("adk AgentTool with include_plugins=False", got_through=bool(shop.ran))
    assert shop.ran == [] and shop.sub_model.requests == []
    assert "include_plugins=False" in shop.model.results()[0]["error"]


def test_a_call_id_used_again_for_another_payment_does_not_run(srv, make_guard, attempt):
    shop = Shop(srv, make_guard("in_process"),
                [[("lookup_card", {"customer": "di"}, "call-1")],
                 [("write_note", {"text": "x"}, "call-1")], "ok"])
    shop.say()
    attempt.record("adk call id re-used for another call",
                   got_through=("write_note", "x") in shop.ran)
    assert shop.ran == [("lookup_card", "di")]
    assert "already used" in shop.model.results()[-1]["error"]


def test_the_same_call_replayed_does_not_run_again_and_the_model_reads_the_first_result(
        srv, make_guard, attempt):
    lookup = ("lookup_card", {"customer": "ed"}, "call-ed")
    shop = Shop(srv, make_guard("in_process"), [[lookup], [lookup], "ok"])
    shop.say()
    attempt.record("adk the same call id and arguments replayed", got_through=len(shop.ran) > 1)
    assert shop.ran == [("lookup_card", "ed")]
    first, replayed = shop.model.results()
    assert replayed == {"result": first["result"]} and "[card]" in replayed["result"]


def test_a_payment_with_a_nan_amount_is_refused_and_does_not_run(srv, guard, attempt):
    shop = Shop(srv, guard, [[("pay", {"amount": float("nan"), "to": "ACME"})], "ok"])
    try:
        shop.say()
        why = shop.model.results()[0]["error"]  # in process: hookgate refuses the call
    except RuntimeError as stopped:  # remote: the client cannot even send it as JSON
        why = str(stopped)
    attempt.record("adk NaN amount", got_through=bool(shop.ran))
    assert shop.ran == []
    assert "amount is NaN, which JSON cannot carry" in why


# -- ADK's own tool confirmation composes with hookgate's gate -------------------------------


def test_a_tools_own_confirmation_still_asks_and_the_call_runs_once_confirmed(
        srv, guard, attempt):
    shop = Shop(srv, guard, [[("tip", {"amount": 3})], "tipped", "again"],
                own_confirmation=True)
    asked = shop.say()
    attempt.record("adk require_confirmation skipped", got_through=bool(shop.ran))
    assert shop.ran == [] and pending_calls(asked) == []  # the user, not hookgate, decides
    shop.confirm_own(asked)
    attempt.record("adk require_confirmation never runs once confirmed",
                   got_through=shop.ran == [])
    assert shop.ran == [("tip", 3)]
    [result] = shop.model.results()
    assert '"tipped": 3' in result["result"]  # hookgate's observation of the run


def test_a_rejection_in_the_tools_own_confirmation_stands(srv, guard):
    shop = Shop(srv, guard, [[("tip", {"amount": 3})], "ok"], own_confirmation=True)
    shop.confirm_own(shop.say(), confirmed=False)
    assert shop.ran == [] and "rejected" in str(shop.model.results())


def test_a_tools_own_confirmation_and_hookgates_gate_must_both_approve(srv, guard, attempt):
    shop = Shop(srv, guard, [[PAY], "paid"], own_confirmation=True)
    asked = shop.say()
    assert shop.ran == [] and pending_calls(asked) == []
    [paused] = pending_calls(shop.confirm_own(asked))  # the user said yes: hookgate asks
    attempt.record("adk require_confirmation confirmed, hookgate pending",
                   got_through=bool(shop.ran))
    assert shop.ran == [] and paused.tool == "pay"
    decide(srv, paused.request_id, "approve")
    shop.resume([paused])
    assert shop.ran == [("pay", 500, "ACME")]


def test_a_confirmation_sent_before_hookgate_decided_pauses_again(srv, guard, attempt):
    shop = Shop(srv, guard, [[PAY], "paid"])
    [paused] = pending_calls(shop.say())
    [again] = pending_calls(shop.resume([paused]))  # early: nobody decided yet
    attempt.record("adk early confirmation", got_through=bool(shop.ran))
    assert shop.ran == [] and again.request_id == paused.request_id
    decide(srv, paused.request_id, "approve")
    shop.resume([again])
    assert shop.ran == [("pay", 500, "ACME")]


def test_an_early_confirmation_pauses_again_in_a_stored_session_another_process_resumes(
        srv, make_guard, tmp_path):
    guard = make_guard("remote")
    stored = f"sqlite+aiosqlite:///{tmp_path / 'adk-sessions.db'}"
    first = Shop(srv, guard, [[PAY]], sessions=stored)
    [paused] = pending_calls(first.say())
    [again] = pending_calls(first.resume([paused]))  # early: it pauses again, stored
    decide(srv, paused.request_id, "approve")
    # Another process: a new model, plugin and runner over the same stored ADK session.
    second = Shop(srv, guard, ["paid"], sessions=stored, session_id=first.session_id)
    second.resume([again])
    for shop in (first, second):
        srv.call(shop.runner.session_service.close())  # type: ignore[attr-defined]
    assert first.ran == [] and second.ran == [("pay", 500, "ACME")]


# -- a batch of confirmations of which only some are decided ---------------------------------


def _three_payments() -> list[tuple[Any, ...]]:
    return [("pay", {"amount": 500, "to": "ACME"}, "pay-1"),
            ("pay", {"amount": 40, "to": "ACME"}, "pay-2"),
            ("pay", {"amount": 70, "to": "ACME"}, "pay-3")]


def test_a_mixed_batch_runs_the_decided_calls_and_pauses_the_undecided_one_again(
        srv, guard, attempt):
    shop = Shop(srv, guard, [_three_payments(), "all done", "again"])
    approved, rejected, undecided = pending_calls(shop.say())
    decide(srv, approved.request_id, "approve")
    decide(srv, rejected.request_id, "reject", reason="not this vendor")
    [again] = pending_calls(shop.resume([approved, rejected, undecided]))
    attempt.record("adk mixed batch: undecided call stuck or run",
                   got_through=("pay", 70, "ACME") in shop.ran)
    assert shop.ran == [("pay", 500, "ACME")]  # the approved one ran, once
    assert again.request_id == undecided.request_id and again.arguments["amount"] == 70

    decide(srv, undecided.request_id, "approve")
    shop.resume([again])
    assert shop.ran == [("pay", 500, "ACME"), ("pay", 70, "ACME")]
    paid, refused, paid_later = shop.model.results()
    assert '"paid": 500' in paid["result"] and '"paid": 70' in paid_later["result"]
    assert "not this vendor" in refused["error"]

    # Every confirmation sent again: nothing runs a second time.
    shop.resume([approved, rejected, undecided, again])
    attempt.record("adk mixed batch replayed", got_through=len(shop.ran) > 2)
    assert shop.ran == [("pay", 500, "ACME"), ("pay", 70, "ACME")]


def test_a_mixed_batch_in_a_stored_session_pauses_again_and_a_third_process_resumes_it(
        srv, make_guard, tmp_path):
    guard = make_guard("remote")
    stored = f"sqlite+aiosqlite:///{tmp_path / 'adk-sessions.db'}"
    first = Shop(srv, guard, [_three_payments()[:2]], sessions=stored)
    approved, undecided = pending_calls(first.say())
    decide(srv, approved.request_id, "approve")
    # Another process sends both confirmations: one is decided, one is not yet.
    second = Shop(srv, guard, [], sessions=stored, session_id=first.session_id)
    [again] = pending_calls(second.resume([approved, undecided]))
    assert again.request_id == undecided.request_id
    decide(srv, undecided.request_id, "approve")
    # A third process resumes the call that paused again.
    third = Shop(srv, guard, ["paid"], sessions=stored, session_id=first.session_id)
    third.resume([again])
    for shop in (first, second, third):
        srv.call(shop.runner.session_service.close())  # type: ignore[attr-defined]
    assert first.ran == [] and second.ran == [("pay", 500, "ACME")]
    assert third.ran == [("pay", 40, "ACME")]
    paid, paid_later = third.model.results()
    assert '"paid": 500' in paid["result"] and '"paid": 40' in paid_later["result"]
