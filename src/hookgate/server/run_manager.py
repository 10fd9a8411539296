"""Runs on the server: start them, checkpoint them, stream them, resume them after a restart."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from hookgate.agent import Agent
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.catalog.build import GATE_NAME
from hookgate.catalog.services import HookServices
from hookgate.engines import ENGINES
from hookgate.engines.delegation import Delegation
from hookgate.engines.events import EventSink, RunEvent
from hookgate.engines.react import ReActEngine
from hookgate.engines.state import RunState
from hookgate.llm.base import ChatModel
from hookgate.server.events_bus import EventBus
from hookgate.storage.database import Database
from hookgate.storage.ledger import DatabaseLedger
from hookgate.storage.run_events import RunEventLog
from hookgate.storage.runs import DatabaseRunStore
from hookgate.tools.calls import ToolCall
from hookgate.workflows import Workflow, WorkflowRunner
from hookgate.workflows.runner import ENGINE_NAME as WORKFLOW_ENGINE

log = logging.getLogger(__name__)


class UnknownAgent(LookupError):
    """No such agent (or not in the caller's org)."""


class UnknownEngine(ValueError):
    """The requested engine does not exist."""


class UnknownWorkflow(LookupError):
    """No such workflow (or not in the caller's org)."""


class RunManager:
    """Owns the tasks of the runs this process executes."""

    def __init__(
        self,
        db: Database,
        approvals: PersistentApprovals,
        services: HookServices,
        agents: dict[str, Agent],
        model_for: Any,
        *,
        max_steps: int = 20,
        workflows: Mapping[str, Workflow] | None = None,
    ) -> None:
        self.db = db
        self.approvals = approvals
        self.services = services
        self.agents = agents
        self.model_for = model_for
        self.max_steps = max_steps
        self.workflows: dict[str, Workflow] = dict(workflows or {})
        self.store = DatabaseRunStore(db)
        self.ledger = DatabaseLedger(db)
        self.bus = EventBus(RunEventLog(db))
        self.tasks: dict[str, asyncio.Task[None]] = {}
        self._stopping = False
        #: Called (in the background) with the state of every run that ends here.
        self.on_run_end: Callable[[RunState], Awaitable[None]] | None = None
        self._after_runs: set[asyncio.Task[None]] = set()

    def engine(self, agent: Agent, name: str = "react") -> ReActEngine:
        if name not in ENGINES:
            raise UnknownEngine(f"unknown engine '{name}' (available: {', '.join(ENGINES)})")
        llm: ChatModel = self.model_for(agent.id)
        return ENGINES[name](llm, services=self.services, ledger=self.ledger, store=self.store,
                             resume_resolver=self._resume_point, max_steps=self.max_steps,
                             delegation=Delegation(self.agents, self.model_for))

    def workflow_runner(self) -> WorkflowRunner:
        return WorkflowRunner(self.workflows, self.agents, self.model_for,
                              services=self.services, ledger=self.ledger, store=self.store,
                              resume_resolver=self._resume_point)

    async def _resume_point(self, state: RunState, call: ToolCall
                            ) -> tuple[str, dict[str, Any]] | None:
        # A call that already reached the gate before a restart continues at the gate, with
        # the arguments stored in its request (the hooks before it already ran).
        request = await self.approvals.store.for_call(state.run_id, call.id)
        if request is None or (request.tool_name, request.agent_id) != (call.name,
                                                                        state.agent_id):
            return None
        return GATE_NAME, dict(request.args)

    async def start(self, agent_id: str, message: str, *, user_id: str, org_id: str | None,
                    conversation_id: str | None = None, engine: str = "react") -> RunState:
        agent = self.agents.get(agent_id)
        if agent is None or agent.org_id != org_id:
            raise UnknownAgent(f"no agent '{agent_id}' in org '{org_id}'")
        eng = self.engine(agent, engine)
        state = eng.new_state(agent, message, user_id=user_id, org_id=org_id,
                              conversation_id=conversation_id)
        await self.store.save(state)
        self._spawn(state, lambda sink: eng.execute(agent, state, sink=sink))
        return state

    async def start_workflow(self, workflow_id: str, message: str, *, user_id: str,
                             org_id: str | None,
                             conversation_id: str | None = None) -> RunState:
        """Start a declared workflow; its run streams and resumes like any other run."""
        workflow = self.workflows.get(workflow_id)
        agent = self.agents.get(workflow.as_agent) if workflow else None
        if agent is None or agent.org_id != org_id:
            raise UnknownWorkflow(f"no workflow '{workflow_id}' in org '{org_id}'")
        runner = self.workflow_runner()
        state = runner.new_state(workflow_id, message, user_id=user_id, org_id=org_id,
                                 conversation_id=conversation_id)
        await self.store.save(state)
        self._spawn(state, lambda sink: runner.execute(state, sink=sink))
        return state

    def _spawn(self, state: RunState, execute: Callable[[EventSink], Awaitable[object]]
               ) -> None:
        history = [RunEvent.from_dict(e) for e in state.trace]
        self.bus.open(state.run_id, history)

        async def go() -> None:
            try:
                await execute(lambda e: self.bus.publish(state.run_id, e))
            except asyncio.CancelledError:
                if not self._stopping:
                    state.status = "cancelled"
                    with contextlib.suppress(Exception):
                        await asyncio.shield(self.store.save(state))
                raise
            except Exception:
                log.exception("run %s crashed", state.run_id)
            finally:
                await self.bus.close(state.run_id)
                self.tasks.pop(state.run_id, None)
                if state.finished and not self._stopping:
                    self._after_run(state)

        self.tasks[state.run_id] = asyncio.create_task(go(), name=f"run-{state.run_id}")

    def _after_run(self, state: RunState) -> None:
        hook = self.on_run_end
        if hook is None:
            return

        async def call() -> None:
            try:
                await hook(state)
            except Exception:
                log.exception("the end-of-run hook of run %s failed", state.run_id)

        task = asyncio.create_task(call(), name=f"after-{state.run_id}")
        self._after_runs.add(task)
        task.add_done_callback(self._after_runs.discard)

    async def resume_all(self) -> int:
        """Continue every run that was in flight when the last process stopped."""
        n = 0
        for state in await self.store.resumable():
            if state.run_id in self.tasks:
                continue
            agent = self.agents.get(state.agent_id)
            workflow_id = state.extra.get("workflow", {}).get("id")
            gone = (f"agent '{state.agent_id}'" if agent is None else
                    f"workflow '{workflow_id}'" if state.engine == WORKFLOW_ENGINE
                    and workflow_id not in self.workflows else None)
            # The event log may hold events emitted after the last checkpoint.
            logged = await self.bus.log.after(state.run_id, 0)
            if len(logged) > len(state.trace):
                state.trace = [e.to_dict() for e in logged]
            await self._cancel_child_requests(state)
            if agent is None or gone is not None:
                reason = f"{gone} no longer exists; the run cannot resume"
                await self.approvals.cancel_run(state.run_id, reason)
                state.status = "failed"
                state.error = reason
                await self.store.save(state)
                continue
            self._spawn(state, self._resumer(agent, state))
            n += 1
        return n

    async def _cancel_child_requests(self, state: RunState) -> None:
        # Child runs (delegates, workflow agent nodes) are not checkpointed on their own: a
        # child interrupted by the restart does not resume (the parent's call reports an
        # unknown outcome and is not run again), so requests it was waiting on would wait
        # for nobody. Their pending events reached the parent's trace; cancel them.
        for event in state.trace:
            if (event.get("type") == "confirmation_pending" and event.get("child_run_id")
                    and event.get("request_id")):
                await self.approvals.cancel(
                    str(event["request_id"]),
                    "the delegated run waiting for this request was interrupted by a "
                    "restart and does not resume")

    def _resumer(self, agent: Agent, state: RunState
                 ) -> Callable[[EventSink], Awaitable[object]]:
        if state.engine == WORKFLOW_ENGINE:
            runner = self.workflow_runner()
            return lambda sink: runner.execute(state, sink=sink)
        engine = self.engine(agent, state.engine)
        return lambda sink: engine.execute(agent, state, sink=sink)

    async def cancel(self, run_id: str) -> bool:
        task = self.tasks.get(run_id)
        if task is None:
            return False
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task
        return True

    async def stop(self) -> None:
        """Stop this process's runs without cancelling their requests: they resume later."""
        self._stopping = True
        tasks = list(self.tasks.values())
        for t in tasks:
            t.cancel()
        for t in tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await t
        if self._after_runs:  # summaries of runs that ended just before
            await asyncio.wait(list(self._after_runs), timeout=5)
