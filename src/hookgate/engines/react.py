"""`ReActEngine`: the model picks tools, the tools run through the hooks, repeat to an answer.

`run()` returns a RunResult; `stream()` yields the same events live; `resume()` continues
a saved RunState (e.g. after a restart while a call waited for approval).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from hookgate.agent import Agent
from hookgate.engines.driver import (
    Lineage,
    ResumeResolver,
    RunDriver,
    RunStore,
    admit_calls,
    assistant_message,
    tool_message,
)
from hookgate.engines.events import EventSink, RunEvent
from hookgate.engines.interrupts import RunParked
from hookgate.engines.registries import RegistryBuilder, builder_or_default
from hookgate.engines.result import RunResult
from hookgate.engines.state import RunState
from hookgate.hooks.services import HookServices
from hookgate.llm.base import ChatModel
from hookgate.telemetry.runs import traced_run
from hookgate.tools.calls import ToolCall
from hookgate.tools.ledger import ExecutionLedger, InMemoryLedger
from hookgate.tools.tool import Tool

DEFAULT_MAX_STEPS = 20


class ReActEngine:
    """Runs agents with a model in a reason-act loop; every tool call takes the guarded path."""

    name = "react"

    def __init__(
        self,
        llm: ChatModel,
        *,
        services: HookServices | None = None,
        registries: RegistryBuilder | None = None,
        ledger: ExecutionLedger | None = None,
        store: RunStore | None = None,
        resume_resolver: ResumeResolver | None = None,
        max_steps: int = DEFAULT_MAX_STEPS,
        extra_tools: list[Tool] | None = None,
    ) -> None:
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.llm = llm
        self.services = services or HookServices()
        #: Builds each run's registry; by default the agent's declared hooks and the
        #: approval gate (hookgate.engines.registries).
        self.registries = builder_or_default(registries)
        self.ledger = ledger if ledger is not None else InMemoryLedger()
        self.store = store
        self.resume_resolver = resume_resolver
        self.max_steps = max_steps
        self.extra_tools = {t.name: t for t in extra_tools or []}

    # -- public API --------------------------------------------------------------------------

    @classmethod
    def new_state(cls, agent: Agent, message: str, *, user_id: str | None = None,
                  org_id: str | None = None, conversation_id: str | None = None,
                  run_id: str | None = None) -> RunState:
        """A new run of ``agent`` on this engine (no model is needed to make one)."""
        state = RunState(agent_id=agent.id, user_id=user_id,
                         org_id=org_id if org_id is not None else agent.org_id,
                         conversation_id=conversation_id, message=message, engine=cls.name)
        if run_id:
            state.run_id = run_id
        return state

    async def run(self, agent: Agent, message: str, *, user_id: str | None = None,
                  org_id: str | None = None, conversation_id: str | None = None,
                  run_id: str | None = None, lineage: Lineage | None = None) -> RunResult:
        """Run ``agent`` on ``message`` until it ends or parks: a run whose call waits for a
        person (approvals on the run queue) returns ``awaiting_approval`` with ``pending``."""
        state = self.new_state(agent, message, user_id=user_id, org_id=org_id,
                               conversation_id=conversation_id, run_id=run_id)
        return await self._until_parked(agent, state, lineage)

    async def resume(self, agent: Agent, state: RunState,
                     lineage: Lineage | None = None) -> RunResult:
        """Continue a saved run where it stopped; a finished run is returned as it is."""
        return await self._until_parked(agent, state, lineage)

    async def _until_parked(self, agent: Agent, state: RunState,
                            lineage: Lineage | None) -> RunResult:
        try:
            return await self.execute(agent, state, lineage=lineage)
        except RunParked:
            # The run holds no task while a person decides; its result says who is awaited.
            state.status = "awaiting_approval"
            return RunResult.from_state(state)

    async def execute(self, agent: Agent, state: RunState, *, sink: EventSink | None = None,
                      lineage: Lineage | None = None) -> RunResult:
        driver = self._driver(agent, state, sink or (lambda e: None), lineage)
        # run_to_end also around the session start: its checkpoint can fail as well.
        await driver.run_to_end(self._drive(driver))
        return RunResult.from_state(driver.state)

    def stream(self, agent: Agent, message: str, *, user_id: str | None = None,
               org_id: str | None = None, conversation_id: str | None = None,
               run_id: str | None = None) -> AsyncIterator[RunEvent]:
        """Yield the run's events as they happen; the last one is ``done``."""
        state = self.new_state(agent, message, user_id=user_id, org_id=org_id,
                               conversation_id=conversation_id, run_id=run_id)
        return self.stream_state(agent, state)

    async def stream_state(self, agent: Agent, state: RunState) -> AsyncIterator[RunEvent]:
        queue: asyncio.Queue[RunEvent | None] = asyncio.Queue()
        task = asyncio.create_task(self.execute(agent, state, sink=queue.put_nowait))
        task.add_done_callback(lambda _t: queue.put_nowait(None))
        try:
            while True:
                event = await queue.get()
                if event is None:
                    break
                yield event
            task.result()
        finally:
            if not task.done():
                task.cancel()

    # -- the loop ----------------------------------------------------------------------------

    def _driver(self, agent: Agent, state: RunState, sink: EventSink,
                lineage: Lineage | None) -> RunDriver:
        return RunDriver(
            agent, state, sink,
            services=self.services, registries=self.registries, ledger=self.ledger,
            store=self.store,
            resume_resolver=self.resume_resolver,
            lineage=lineage or Lineage(execution_path="react"),
            extra_tools=self.extra_tools,
        )

    @traced_run()
    async def _drive(self, d: RunDriver) -> None:
        if d.state.finished:
            return
        if not d.build():
            await d.checkpoint()
            return
        # The loop checkpoints the model's first turn before any tool runs (the DAG, its
        # plan before any step): a session without SessionStart hooks keeps nothing.
        if not await d.start_session(checkpoint_without_hooks=False):
            return
        await d.run_to_end(self._loop(d))

    async def _loop(self, d: RunDriver) -> None:
        state = d.state
        while True:
            if state.pending_calls:
                calls = [ToolCall.from_dict(c) for c in state.pending_calls]
                outcomes = await d.run_calls(calls)
                state.messages.extend(tool_message(o) for o in outcomes)
                state.pending_calls = []
                state.outcomes = {}
                state.status = "running"
                await d.checkpoint()
            if state.step >= self.max_steps:
                await d.finish("max_steps", error=(
                    f"the run stopped after {self.max_steps} model turns without an answer"))
                return
            turn = await self.llm.complete(list(state.messages), self._tool_schemas(d))
            state.step += 1
            if not turn.tool_calls:
                answer = turn.answer if turn.answer is not None else (turn.content or "")
                state.messages.append({"role": "assistant", "content": answer})
                await d.finish("completed", answer=answer)
                return
            # Admitted again after renaming: a suffix may take an id past the column.
            calls = admit_calls(unique_call_ids(admit_calls(turn.tool_calls),
                                                used_call_ids(state.messages), state.step))
            state.messages.append(assistant_message(calls, turn.content))
            state.pending_calls = [c.to_dict() for c in calls]
            d.emit("model_turn", {"step": state.step,
                                  "tool_calls": [c.to_dict() for c in calls]})
            await d.checkpoint_turn()

    def _tool_schemas(self, d: RunDriver) -> list[dict[str, Any]]:
        return [t.schema() for t in d.tools.values()]


def used_call_ids(messages: list[dict[str, Any]]) -> set[str]:
    """Every tool call id the run's conversation already holds."""
    return {str(c.get("id")) for m in messages if m.get("role") == "assistant"
            for c in m.get("tool_calls") or ()}


def unique_call_ids(calls: list[ToolCall], used: set[str], step: int) -> list[ToolCall]:
    """The turn's calls with ids unique within the run: a missing id, or one the model
    re-uses (in this turn or from an earlier one), gets a fresh one no call has had.

    Tool call ids key the approval requests and the at-most-once ledger: a re-used id
    must never find the request or the result of the call that had it first.
    """
    taken = set(used)
    out = []
    for i, c in enumerate(calls):
        cid = c.id or f"call_{step}_{i}"
        n = 0
        while cid in taken:
            n += 1
            cid = f"{c.id or 'call'}_{step}_{i}" + (f"_{n}" if n > 1 else "")
        taken.add(cid)
        out.append(ToolCall(cid, c.name, c.args))
    return out
