"""The approvals' port to the run layer: one run queue continues their parked runs; without
one, a waiting call waits in memory."""

from __future__ import annotations

import pytest

from hookgate.agent import Agent
from hookgate.approvals.continuations import ContinuationAlreadyRegistered, RunContinuations
from hookgate.approvals.service import ApprovalAsk


class Queue:
    def __init__(self, parks: bool) -> None:
        self._parks = parks
        self.continued: list[str] = []

    async def after_transition(self, session: object, request: object) -> None:
        self.continued.append(str(request))

    def parks(self, ask: ApprovalAsk) -> bool:
        return self._parks


def ask() -> ApprovalAsk:
    payer = Agent(id="payer", name="payer", instructions="", tools=[])
    return ApprovalAsk(agent=payer, run_id="r1", tool_call_id="c1", tool_name="pay",
                       args={}, args_sha256="0" * 64, user_id="u", org_id="o")


async def test_without_a_queue_nothing_parks_and_a_transition_continues_nothing() -> None:
    port = RunContinuations()
    assert not port.registered
    assert port.parks(ask()) is False
    await port.after_transition(None, None)  # type: ignore[arg-type]


async def test_the_registered_queue_decides_parking_and_continues_each_transition() -> None:
    port, queue = RunContinuations(), Queue(parks=True)
    port.register(queue)
    assert port.parks(ask()) is True
    await port.after_transition(None, "req-1")  # type: ignore[arg-type]
    assert queue.continued == ["req-1"]


def test_a_second_queue_cannot_take_over_the_same_approvals() -> None:
    port = RunContinuations()
    port.register(Queue(parks=False))
    with pytest.raises(ContinuationAlreadyRegistered, match="already continued"):
        port.register(Queue(parks=True))
