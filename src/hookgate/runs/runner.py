"""Runs on the server: start them, advance them, stream them, continue them after a restart.

The runner knows how to build a run's engine and advance it; *where* a run advances is the
executor's business (runs.executors): a task of this process for a SQLite file, a job of
the run queue for PostgreSQL. Routes talk to the runner and never own tasks.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from hookgate.agent import Agent
from hookgate.approvals.persistent import PersistentApprovals
from hookgate.approvals.records import ConfirmationRequest
from hookgate.catalog.build import GATE_NAME, build_registry
from hookgate.engines import ENGINES, DelegatingReActEngine
from hookgate.engines.children import parked_run_ids
from hookgate.engines.delegation import Delegation
from hookgate.engines.driver import RunStore
from hookgate.engines.events import EventSink, RunEvent, event_of
from hookgate.engines.react import ReActEngine
from hookgate.engines.state import RunState
from hookgate.hooks.services import HookServices
from hookgate.llm.base import ChatModel
from hookgate.runs.events_bus import EventBus
from hookgate.runs.executors.base import RunExecutor
from hookgate.runs.notifications import Wakers
from hookgate.storage.backends.base import AlongWrite
from hookgate.storage.database import Database
from hookgate.storage.fencing import Fence
from hookgate.storage.ledger import DatabaseLedger
from hookgate.storage.run_events import RunEventLog
from hookgate.storage.runs import DatabaseRunStore, whole_trace
from hookgate.telemetry.propagation import remember_trace
from hookgate.tools.calls import ToolCall
from hookgate.tools.ledger import ExecutionLedger, FinishedCall, PriorExecution
from hookgate.workflows import Workflow, WorkflowRunner
from hookgate.workflows.runner import ENGINE_NAME as WORKFLOW_ENGINE

log = logging.getLogger(__name__)


class UnknownAgent(LookupError):
    """No such agent (or not in the caller's org)."""


class UnknownEngine(ValueError):
    """The requested engine does not exist."""


class UnknownWorkflow(LookupError):
    """No such workflow (or not in the caller's org)."""


def engine_class(name: str) -> type[DelegatingReActEngine]:
    """The engine called ``name`` (``react``, ``dag``); UnknownEngine for any other."""
    try:
        return ENGINES[name]
    except KeyError:
        raise UnknownEngine(
            f"unknown engine '{name}' (available: {', '.join(ENGINES)})") from None


#: Runs one advance of a run with the given event sink.
Advance = Callable[[EventSink], Awaitable[object]]


class Runner:
    """Builds and advances runs; an executor decides where and when they advance."""

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
        executor: Callable[[Runner], RunExecutor] | None = None,
        on_run_end: Callable[[RunState], Awaitable[None]] | None = None,
        followers: Wakers | None = None,
    ) -> None:
        """``executor`` builds the executor that advances this runner's runs (None: runs
        cannot start here); ``on_run_end`` is called with every run that ends here;
        ``followers`` wakes this process's streams when another instance logged events."""
        self.db = db
        self.approvals = approvals
        self.services = services
        self.agents = agents
        self.model_for = model_for
        self.max_steps = max_steps
        self.workflows: dict[str, Workflow] = dict(workflows or {})
        #: Every checkpoint of the server's runs carries the events emitted since the last
        #: one, so their traces are stored once, in the event log.
        self.store = DatabaseRunStore(db, trace_in_log=True)
        self.ledger = DatabaseLedger(db)
        self.bus = EventBus(RunEventLog(db), followers=followers)
        #: Called (in the background) with the state of every run that ends here.
        self.on_run_end: Callable[[RunState], Awaitable[None]] | None = on_run_end
        self.executor: RunExecutor | None = executor(self) if executor is not None else None

    # -- building engines ------------------------------------------------------------------

    def engine(self, agent: Agent, name: str = "react", *, store: RunStore | None = None,
               ledger: ExecutionLedger | None = None,
               decided: ConfirmationRequest | None = None) -> ReActEngine:
        """``decided``: the request whose decision continues this run, as the decision wrote
        it (where its call resumes, without reading it again)."""
        llm: ChatModel = self.model_for(agent.id)
        return engine_class(name)(llm, services=self.services, registries=build_registry,
                                  ledger=ledger or self.ledger, store=store or self.store,
                                  resume_resolver=self._resume_point_after(decided),
                                  max_steps=self.max_steps,
                                  delegation=Delegation(self.agents, self.model_for))

    def workflow_runner(self, *, store: RunStore | None = None,
                        ledger: ExecutionLedger | None = None,
                        decided: ConfirmationRequest | None = None) -> WorkflowRunner:
        return WorkflowRunner(self.workflows, self.agents, self.model_for,
                              services=self.services, registries=build_registry,
                              ledger=ledger or self.ledger, store=store or self.store,
                              resume_resolver=self._resume_point_after(decided))

    def _resume_point_after(self, decided: ConfirmationRequest | None
                            ) -> Callable[[RunState, ToolCall],
                                          Awaitable[tuple[str, dict[str, Any]] | None]]:
        """Where a re-entered call resumes; the call of ``decided`` from that request (the
        row the decision's own transaction returned), any other call from a read."""
        if decided is None:
            return self._resume_point

        async def resume_point(state: RunState, call: ToolCall
                               ) -> tuple[str, dict[str, Any]] | None:
            known = (decided if (decided.run_id, decided.tool_call_id) == (state.run_id,
                                                                           call.id)
                     else None)
            return await self._resume_point(state, call, known)
        return resume_point

    async def _resume_point(self, state: RunState, call: ToolCall,
                            known: ConfirmationRequest | None = None
                            ) -> tuple[str, dict[str, Any]] | None:
        # A call that already reached the gate before a restart continues at the gate, with
        # the arguments stored in its request (the hooks before it already ran). ``known``:
        # the call's request in hand. What this reads of it (its tool, agent and arguments
        # as asked) never changes once it exists; whether it is approved is the gate's
        # read, at the call's use (for_call_or_rejected_like), never taken from here.
        request = known if known is not None else await self.approvals.store.for_call(
            state.run_id, call.id)
        if request is None or (request.tool_name, request.agent_id) != (call.name,
                                                                        state.agent_id):
            return None
        return GATE_NAME, dict(request.args)

    # -- starting runs ---------------------------------------------------------------------

    def _executor(self) -> RunExecutor:
        if self.executor is None:
            raise RuntimeError("the runner has no executor (the runtime is not started)")
        return self.executor

    async def start(self, agent_id: str, message: str, *, user_id: str, org_id: str | None,
                    conversation_id: str | None = None, engine: str = "react") -> RunState:
        agent = self.agents.get(agent_id)
        if agent is None or agent.org_id != org_id:
            raise UnknownAgent(f"no agent '{agent_id}' in org '{org_id}'")
        # The state alone: the model client is built where the run advances, not here.
        state = engine_class(engine).new_state(agent, message, user_id=user_id,
                                               org_id=org_id, conversation_id=conversation_id)
        remember_trace(state.extra)  # any worker continues the caller's trace
        await self._executor().submit(state)
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
        remember_trace(state.extra)  # any worker continues the caller's trace
        await self._executor().submit(state)
        return state

    async def cancel(self, run_id: str) -> bool:
        return await self._executor().cancel(run_id)

    async def stop(self) -> None:
        if self.executor is not None:
            await self.executor.stop()

    # -- advancing runs (called by executors) ----------------------------------------------

    async def prepare(self, state: RunState, fence: Fence | None = None,
                      end: RunEndWork | None = None,
                      decided: ConfirmationRequest | None = None) -> Advance | None:
        """Make a stored run ready to continue; None if it must not (it is finished, or
        what it runs no longer exists: then it is ended here as ``failed``). ``end``: work
        to commit with the run's end, if it ends in this advance; ``decided``: the request
        whose decision continues it, as that decision wrote it."""
        # The trace is in the event log (stored states leave it out; one stored by an
        # earlier version has it, and the log may hold events emitted after it). A run's
        # first executor has none to read: every event write is fenced, and the fence
        # counts takeovers, so at token 1 nothing else has held it (it has not started).
        first_hold = (fence is not None and fence.token == 1 and not state.session_started
                      and not state.trace)
        logged = [] if first_hold else await self.bus.log.after(state.run_id, 0)
        if len(logged) > len(state.trace):
            state.trace = whole_trace(state.trace, logged)
        elif not state.finished:
            # Or the other way round: the checkpoint holds events whose write was cut off
            # (the process died before its batch reached the log). A re-entered call is not
            # announced again, so its `tool_call` reaches the log from here.
            last = max((e.seq for e in logged), default=0)
            missing = [e for e in self.history(state) if e.seq > last]
            if missing:
                await self.bus.log.append(state.run_id, missing, fence=fence)
        done = next((e for e in reversed(logged) if e.type == "done"), None)
        if done is not None and not state.finished:
            # It ended after its last checkpoint: record the end it announced, never a
            # second one.
            state.status = done.data.get("status") or "failed"
            state.answer = done.data.get("answer", state.answer)
            await self.store.save(state, fence=fence)
            return None
        if state.finished:
            if done is None and fence is not None:
                # It ended, but its last events were refused: the run was taken over between
                # its last checkpoint and their write. Log what the checkpoint holds, and
                # announce the end once.
                last = max((e.seq for e in logged), default=0)
                missing = [e for e in self.history(state) if e.seq > last]
                if not any(e.type == "done" for e in missing):
                    missing.append(event_of("done", {"status": state.status,
                                                     "answer": state.answer},
                                            seq=max(len(state.trace), last) + 1))
                    state.trace.append(missing[-1].to_dict())
                    await self.store.save(state, fence=fence, events=missing)
                else:
                    await self.bus.log.append(state.run_id, missing, fence=fence)
            return None
        await self._cancel_child_requests(state)
        agent = self.agents.get(state.agent_id)
        workflow_id = state.extra.get("workflow", {}).get("id")
        gone = (f"agent '{state.agent_id}'" if agent is None else
                f"workflow '{workflow_id}'" if state.engine == WORKFLOW_ENGINE
                and workflow_id not in self.workflows else None)
        if agent is None or gone is not None:
            reason = f"{gone} no longer exists; the run cannot resume"
            await self.approvals.cancel_run(state.run_id, reason)
            state.status = "failed"
            state.error = reason
            await self.store.save(state, fence=fence)
            return None
        return self.advance(agent, state, fence=fence,
                            ledger=None if fence is None else self.ledger.fenced(fence),
                            end=end, decided=decided)

    def advance(self, agent: Agent, state: RunState, *, fence: Fence | None = None,
                ledger: ExecutionLedger | None = None,
                end: RunEndWork | None = None,
                decided: ConfirmationRequest | None = None) -> Advance:
        """The coroutine factory that advances ``state`` until it ends or must wait; its
        checkpoints carry the events emitted since (under ``fence``, if given), and the
        run's end carries ``end``'s work."""
        store = _ExecutorStore(self.store, self.bus, fence, end)
        if state.engine == WORKFLOW_ENGINE:
            runner = self.workflow_runner(store=store, ledger=ledger, decided=decided)
            return lambda sink: runner.execute(state, sink=sink)
        engine = self.engine(agent, state.engine, store=store, ledger=ledger,
                             decided=decided)
        return lambda sink: engine.execute(agent, state, sink=sink)

    async def settle_requests(self, state: RunState) -> None:
        """A run that ended leaves no request waiting for nobody: one still pending (a call
        of its last turn parked while another call of that turn ended the run, e.g. a
        hook's ``continue: false``) is cancelled, its children's included. Only a run whose
        trace shows a request it never saw resolved pays the query."""
        if not state.finished:
            return
        if _unresolved(state.trace):
            try:
                await self.approvals.cancel_run(
                    state.run_id, f"the run ended ({state.status}) before this request was "
                                  "decided; nothing would run on its decision")
            except Exception:  # the request still ends by its expiry; its decision is moot
                log.exception("cancelling the requests left by run %s failed", state.run_id)

    def history(self, state: RunState) -> list[RunEvent]:
        return [RunEvent.from_dict(e) for e in state.trace]

    async def _cancel_child_requests(self, state: RunState) -> None:
        # A child run (a delegate, a workflow's agent node) that waited in memory is not
        # checkpointed: one interrupted by a restart does not resume (the parent's call
        # reports an unknown outcome and is not run again), so requests it was waiting on
        # would wait for nobody. Their pending events reached the parent's trace; cancel
        # them. A child that parked with the run resumes from the run's state: not its.
        parked = parked_run_ids(state)
        for event in _unresolved(state.trace):  # a resolved one needs no write
            if event.get("child_run_id") and event.get("child_run_id") not in parked:
                await self.approvals.cancel(
                    str(event["request_id"]),
                    "the delegated run waiting for this request was interrupted by a "
                    "restart and does not resume")

    async def trace(self, run_id: str, state: RunState,
                    logged: Sequence[RunEvent] | None = None) -> list[dict[str, Any]]:
        """The run's events so far: this process's live feed, else the event log
        (``logged``: as read with the state)."""
        feed = self.bus.feeds.get(run_id)
        if feed is not None:
            return [e.to_dict() for e in feed.events]
        if logged is None:
            logged = await self.bus.log.after(run_id, 0)
        return whole_trace(state.trace, logged)


def _unresolved(trace: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The ``confirmation_pending`` events of requests the trace never saw resolved, one
    per request."""
    resolved = {e.get("request_id") for e in trace if e.get("type") == "confirmation_resolved"}
    seen: dict[str, dict[str, Any]] = {}
    for e in trace:
        rid = e.get("request_id")
        if e.get("type") == "confirmation_pending" and isinstance(rid, str) \
                and rid not in resolved:
            seen.setdefault(rid, e)
    return list(seen.values())


class RunEndWork(Protocol):
    """Work that commits in the statement storing a run's end (a backend that
    ``carries_ledger``): the run queue's job taken for the run, ended with it."""

    run_id: str

    def along(self) -> AlongWrite: ...


class _ExecutorStore:
    """The run store as one executor of a run sees it: each checkpoint writes the events
    pending on the bus in its transaction, and only under the executor's fence (if any)."""

    def __init__(self, store: DatabaseRunStore, bus: EventBus, fence: Fence | None,
                 end: RunEndWork | None = None) -> None:
        self.store = store
        self.bus = bus
        self.fence = fence
        self.end = end

    def _along(self, state: RunState) -> AlongWrite | None:
        end = self.end
        return (end.along() if end is not None and state.finished
                and state.run_id == end.run_id else None)

    async def save(self, state: RunState) -> None:
        along = self._along(state)
        await self.bus.checkpoint(state.run_id, lambda events: self.store.save(
            state, fence=self.fence, events=events, along=along), fence=self.fence)

    @property
    def carries_ledger(self) -> bool:
        """Whether checkpoints carry the ledger's records: the backend takes them, and the
        executor's ledger is fenced by this same fence (`Runner.prepare`)."""
        return self.store.db.backend.carries_ledger

    async def save_carrying(self, state: RunState, *, finishes: Sequence[FinishedCall],
                            claim: tuple[str, str, str, str] | None
                            ) -> PriorExecution | None:
        """`save`, the ledger's records in its transaction (see DatabaseRunStore)."""
        prior: list[PriorExecution | None] = [None]

        along = self._along(state)

        async def save(events: Sequence[RunEvent]) -> None:
            prior[0] = await self.store.save_carrying(
                state, fence=self.fence, events=events, finishes=finishes, claim=claim,
                along=along)

        await self.bus.checkpoint(state.run_id, save, fence=self.fence)
        return prior[0]

    async def record_failure(self, state: RunState, error: str) -> None:
        # As the in-process path does: a run whose checkpoint failed is failed (under the
        # fence: an executor that took the run over owns its outcome), never left to be
        # continued from its last good checkpoint as if nothing had happened.
        await self.store.record_failure(state, error, fence=self.fence)
