"""A run's state is plain data (SPEC §3): it survives JSON, and a run cut off mid-way
finishes in a fresh engine with the same answer, without running a finished tool again."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from hookgate import Agent, ReActEngine, RunState, ScriptedLLM, tool
from tests.hookfixtures import agent_with, pay_tool


class ProcessDied(BaseException):
    """Raised from a checkpoint to stop the run the way a crash would: nothing catches it."""


class JsonCheckpoints:
    """A RunStore that keeps the JSON of every checkpoint (as a database row would) and can
    make the process "die" right after the checkpoint ``die_after`` picks."""

    def __init__(self, die_after: Callable[[RunState], bool] | None = None) -> None:
        self.saved: list[str] = []
        self.die_after = die_after

    async def save(self, state: RunState) -> None:
        self.saved.append(state.to_json())
        if self.die_after is not None and self.die_after(state):
            self.die_after = None
            raise ProcessDied


def model(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Pays, then looks up, then answers with everything the tools said."""
    turn = sum(1 for m in messages if m["role"] == "assistant")
    if turn == 0:
        return {"tool_calls": [{"name": "oa__purchase_pay",
                                "args": {"amount": 70, "vendor": "ACME"}, "id": "pay_1"}]}
    if turn == 1:
        return {"tool_calls": [{"name": "crm__balance", "args": {"vendor": "ACME"},
                                "id": "bal_1"}]}
    return {"answer": " / ".join(m["content"] for m in messages if m["role"] == "tool")}


def buyer(paid: list[dict[str, Any]], balances: list[str]) -> Agent:
    @tool
    async def crm__balance(vendor: str) -> str:
        balances.append(vendor)
        return f"{vendor} balance: {100 - sum(p['amount'] for p in paid)}"

    return agent_with([pay_tool(paid), crm__balance])


def test_run_state_round_trips_through_json() -> None:
    state = RunState(agent_id="buyer", user_id="alice", org_id="acme", message="pay ACME",
                     session_started=True, step=1,
                     messages=[{"role": "system", "content": "é 🙂"},
                               {"role": "user", "content": "pay ACME"}],
                     pending_calls=[{"id": "c1", "name": "oa__purchase_pay",
                                     "args": {"amount": 1.5, "vendor": None}}],
                     outcomes={"c1": {"tool_call_id": "c1", "observation": "ok"}},
                     trace=[{"type": "model_turn", "seq": 1, "step": 1}],
                     extra={"approval": {"request_id": "r9"}})

    again = RunState.from_json(state.to_json())

    assert again == state
    assert again.to_json() == state.to_json()


async def test_a_finished_runs_state_round_trips_through_json() -> None:
    result = await ReActEngine(ScriptedLLM(model)).run(buyer([], []), "pay", user_id="alice")
    assert result.state is not None

    assert RunState.from_json(result.state.to_json()) == result.state


@pytest.mark.parametrize("moment", ["after the model turn", "after the tool's outcome"])
async def test_a_run_cut_off_mid_way_resumes_in_a_fresh_engine_to_the_same_answer(
    moment: str,
) -> None:
    died_at: Callable[[RunState], bool]
    if moment == "after the model turn":
        def died_at(s: RunState) -> bool:
            return bool(s.pending_calls) and not s.outcomes
    else:
        # A turn's last call is checkpointed with the turn (its result in the messages).
        def died_at(s: RunState) -> bool:
            return "pay_1" in s.outcomes or any(
                m.get("tool_call_id") == "pay_1" for m in s.messages)

    paid_once: list[dict[str, Any]] = []
    uninterrupted = await ReActEngine(ScriptedLLM(model)).run(
        buyer(paid_once, []), "pay ACME 70", user_id="alice", org_id="acme")

    paid: list[dict[str, Any]] = []
    balances: list[str] = []
    store = JsonCheckpoints(die_after=died_at)
    with pytest.raises(ProcessDied):
        await ReActEngine(ScriptedLLM(model), store=store).run(
            buyer(paid, balances), "pay ACME 70", user_id="alice", org_id="acme")
    ran_before_the_crash = len(paid)

    saved = RunState.from_json(store.saved[-1])
    resumed = await ReActEngine(ScriptedLLM(model)).resume(buyer(paid, balances), saved)

    assert uninterrupted.status == resumed.status == "completed"
    assert resumed.answer == uninterrupted.answer == (
        "paid 70 to ACME / ACME balance: 30")
    assert paid == [{"amount": 70, "vendor": "ACME"}]
    assert ran_before_the_crash == (1 if moment == "after the tool's outcome" else 0)
    assert balances == ["ACME"]
    assert resumed.run_id == saved.run_id


async def test_resuming_a_finished_run_returns_it_without_asking_the_model() -> None:
    result = await ReActEngine(ScriptedLLM(model)).run(buyer([], []), "pay", user_id="alice")
    assert result.state is not None
    asked: list[Any] = []

    def never(messages: list[dict[str, Any]]) -> dict[str, Any]:
        asked.append(messages)
        return {"answer": "again?"}

    paid: list[dict[str, Any]] = []
    again = await ReActEngine(ScriptedLLM(never)).resume(
        buyer(paid, []), RunState.from_json(result.state.to_json()))

    assert asked == []
    assert paid == []
    assert (again.status, again.answer) == (result.status, result.answer)
