"""The run plumbing every engine shares: build the registry, start the session, record
events, checkpoint the state, and push a turn's tool calls through the guarded path.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from hookgate.agent import Agent
from hookgate.engines.children import CURRENT_CALL, call_slot, parked_child
from hookgate.engines.events import EventSink, event_of
from hookgate.engines.interrupts import RunParked, RunStopped, first_to_raise
from hookgate.engines.registries import RegistryBuilder
from hookgate.engines.state import RunState
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.facts import Fact, FactsUnavailable, facts_session
from hookgate.hooks.model import HookContext, HookPoint
from hookgate.hooks.registry import ADMITTED, HookRegistry
from hookgate.hooks.services import HookServices
from hookgate.hooks.transcript import remove_transcript, write_transcript
from hookgate.llm.base import ModelError
from hookgate.retries import doubling, retrying, warn_before_retry
from hookgate.tools.arguments import CALL_ID_COLUMN, admit_call, storable_text
from hookgate.tools.calls import CallIdentity, ExecutionPath, ToolCall, ToolOutcome
from hookgate.tools.guarded import execute_tool_call
from hookgate.tools.guarded_call import new_call
from hookgate.tools.ledger import ExecutionLedger, FinishedCall, PriorExecution
from hookgate.tools.tool import Tool


class RunStore(Protocol):
    """Where checkpoints go (the server's database; nothing for a plain library run)."""

    async def save(self, state: RunState) -> None: ...


@runtime_checkable
class LedgerCarrier(Protocol):
    """A RunStore whose checkpoint can carry the ledger's records in its own transaction:
    the results of calls whose tool ran, and the claim of the call about to run (fenced
    like the checkpoint). One commit instead of two or three (docs: the durable path)."""

    @property
    def carries_ledger(self) -> bool: ...

    async def save(self, state: RunState) -> None: ...

    async def save_carrying(self, state: RunState, *, finishes: Sequence[FinishedCall],
                            claim: tuple[str, str, str, str] | None
                            ) -> PriorExecution | None: ...


@runtime_checkable
class FailureStore(Protocol):
    """A RunStore that can mark a run failed when its full state cannot be saved."""

    async def record_failure(self, state: RunState, error: str) -> None: ...


log = logging.getLogger(__name__)
#: Where a run keeps the ``stopReason`` of a hook that answered ``continue: false``: in the
#: state, so a run that went down before it ended ends on its next advance, not later.
STOP_KEY = "stop_reason"
#: Seconds between attempts to record a failed run while the database is away (doubling).
FAILURE_RETRY_S = (0.2, 30.0)

#: Given a run and a call interrupted in flight, where its PreToolUse chain stopped: (hook
#: name, args that hook saw), or None to run the chain from the start. Asked only about the
#: calls a resumed run had in flight when it stopped (see RunDriver.interrupted).
ResumeResolver = Callable[[RunState, ToolCall], Awaitable[tuple[str, dict[str, Any]] | None]]


@dataclass(slots=True)
class Lineage:
    """Where a run sits in a delegation tree."""

    execution_path: ExecutionPath = "react"
    parent_agent_id: str | None = None
    depth: int = 0
    #: A child's root: the stored run it runs inside (None: this run is the root).
    root_run_id: str | None = None
    #: A delegate's caller: the run that delegated to it (None: not delegated).
    parent_run_id: str | None = None


class RunDriver:
    """One run of one agent: the state, its registry, and the event and checkpoint flow."""

    def __init__(
        self,
        agent: Agent,
        state: RunState,
        sink: EventSink,
        *,
        services: HookServices,
        registries: RegistryBuilder,
        ledger: ExecutionLedger | None,
        store: RunStore | None,
        resume_resolver: ResumeResolver | None,
        lineage: Lineage,
        extra_tools: Mapping[str, Tool] | None = None,
    ) -> None:
        self.agent = agent
        self.state = state
        self._sink = sink
        self.services = services
        #: Builds this run's registry (and its delegates'): see hookgate.engines.registries.
        self.registries = registries
        self.ledger = ledger
        self.store = store
        self.resume_resolver = resume_resolver
        self.lineage = lineage
        self.tools: dict[str, Tool] = {**agent.toolbox(), **(extra_tools or {})}
        self.registry: HookRegistry | None = None
        #: Calls in flight when this run last stopped (id → tool name); only these may
        #: resume part-way through their hooks, once each.
        self.interrupted = interrupted_calls(state)
        self.transcript_path: str | None = None
        self._save_lock = asyncio.Lock()
        #: Status saves in flight, each with whether it has begun (see `_checkpoint_soon`).
        self._pending_saves: dict[asyncio.Task[None], list[bool]] = {}
        #: With a store that carries the ledger: the calls' results not yet written (the
        #: next checkpoint writes them), and whether the state holds what the next claim's
        #: checkpoint writes: a model turn (see `checkpoint_turn`) or a call's decision
        #: (see `emit`).
        # The flag first: a runtime Protocol check costs ~15 µs, on every run of every store.
        self._carrier = store if ledger is not None and getattr(
            store, "carries_ledger", False) is True and isinstance(store, LedgerCarrier) \
            else None
        self._finished: list[FinishedCall] = []
        self._unsaved = False

    # -- events and checkpoints ------------------------------------------------------------

    def emit(self, type_: str, data: dict[str, Any]) -> None:
        event = event_of(type_, data, len(self.state.trace) + 1)
        self.state.trace.append(event.to_dict())
        if type_ == "confirmation_pending":
            self.state.status = "awaiting_approval"
            self._checkpoint_soon()
        elif type_ == "confirmation_resolved" and self.state.status == "awaiting_approval":
            self.state.status = "running"
            if self._carrier is not None:
                # Written with what comes next: the approved call's claim carries it (one
                # statement, the claim durable before the tool as ever), or the checkpoint
                # before a hook or a blocked call's record (`_settle`), or the turn's.
                self._unsaved = True
            else:
                self._checkpoint_soon()
        self._sink(event)

    def _checkpoint_soon(self) -> None:
        # emit() is synchronous; the status change is saved by a task of its own so that
        # readers of the stored run see "awaiting_approval" while a person is asked.
        if self.store is None:
            return
        began = [False]

        async def save() -> None:
            began[0] = True
            await self.checkpoint()

        task = asyncio.get_running_loop().create_task(save())
        self._pending_saves[task] = began
        task.add_done_callback(self._pending_saves.pop)

    async def checkpoint(self) -> None:
        if self.store is None:
            return
        async with self._save_lock:
            await self._save(None)

    async def _save(self, claim: tuple[str, str, str, str] | None
                    ) -> PriorExecution | None:
        """Under the save lock: the state, with the results not yet written and ``claim``
        when the store carries them."""
        assert self.store is not None
        carrier, finished = self._carrier, self._finished
        if carrier is None or not (finished or claim is not None):
            self._unsaved = False
            await self.store.save(self.state)
            return None
        self._finished, self._unsaved = [], False
        try:
            return await carrier.save_carrying(self.state, finishes=finished, claim=claim)
        except BaseException:
            # Not written (or written, then refused by the fence: writing them again is
            # the same): the next checkpoint, or `_write_finished`, takes them.
            self._finished[:0] = finished
            raise

    async def checkpoint_turn(self) -> None:
        """Checkpoint a model turn whose tool calls run next. With a store that carries the
        ledger, the turn is saved by its first call's claim, in its transaction, unless
        something of a call is written or asked first: a PreToolUse hook that runs for it,
        or an observer of a blocked call, saves it before (`_settle`). A crash before then
        asks the model for the turn again: nothing of it had been written, no tool had
        started."""
        if self._carrier is not None:
            self._unsaved = True
            return
        await self.checkpoint()

    async def _settle(self) -> None:
        """The checkpoint the next claim would carry (a model turn, a call's decision), if
        none has written it yet: a hook is about to run for a call (it may write, or ask a
        person), or an observer of a blocked call to write about it
        (`CallIdentity.settle`)."""
        if self._unsaved:
            await self.checkpoint()

    async def _write_finished(self) -> None:
        """The results not yet written, on their own (a run that stops without another
        checkpoint of this driver: parked, or cancelled)."""
        finished, self._finished = self._finished, []
        if self.ledger is not None:
            for f in finished:
                await self.ledger.finish(*f)

    async def finish(self, status: str, *, answer: str | None = None,
                     error: str | None = None) -> None:
        self.state.status = status  # type: ignore[assignment]
        if answer is not None:
            self.state.answer = answer
        if error is not None:
            self.state.error = error
            self.emit("error", {"error": error, "status": status})
        if answer is not None:
            self.emit("answer", {"answer": answer})
        self.emit("done", {"status": status, "answer": self.state.answer})
        await self.checkpoint()
        remove_transcript(self.transcript_path)

    async def run_to_end(self, body: Awaitable[None]) -> None:
        """Await an engine's main loop; a model error or any other exception (a checkpoint
        that cannot be serialised or stored included) ends the run as ``failed`` with the
        reason, so its stream closes instead of hanging."""
        try:
            await body
        except asyncio.CancelledError:
            if self._finished:  # a tool ran: its result stays with its claim
                with contextlib.suppress(Exception):
                    await asyncio.shield(self._write_finished())
            raise
        except RunParked:
            # The executor saves the parked run next (with its parked children's states):
            # a status save still in flight must land before that one, not after it.
            # One that has not begun is dropped: the parked run's save writes that status
            # (a call that parks as it asks saves the run once, not twice).
            for task, began in list(self._pending_saves.items()):
                if not began[0]:
                    task.cancel()
            if self._pending_saves:
                await asyncio.gather(*self._pending_saves, return_exceptions=True)
            await self._write_finished()  # a call of the turn that finished as it parked
            raise
        except RunStopped as exc:
            await self._end_stopped(exc.reason)
        except ModelError as exc:
            await self.fail(f"model error: {exc}")
        except Exception as exc:
            await self.fail(f"{type(exc).__name__}: {exc}")

    async def fail(self, error: str) -> None:
        """End the run as ``failed``; never raises (but for cancellation).

        When even the failed state cannot be saved (it holds what no store can take, or the
        database is away), the store records the failure on the last good checkpoint,
        retrying until the database answers, so the run is never left "running".
        """
        error = storable_text(error)
        if self.state.finished and self.state.status != "failed":
            error = f"{error} (after the run had ended '{self.state.status}')"
        try:
            await self.finish("failed", error=error)
            return
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            error = storable_text(f"{error}; then saving the failed run failed: "
                                  f"{type(exc).__name__}: {exc}")
        self.state.status = "failed"
        self.state.error = error
        if self._finished:  # the tools that ran keep their results, whatever the state
            with contextlib.suppress(Exception):
                await self._write_finished()
        await self._record_failure(error)

    async def _record_failure(self, error: str) -> None:
        store = self.store
        if not isinstance(store, FailureStore):
            log.error("run %s failed and could not be saved: %s", self.state.run_id, error)
            return
        first, ceiling = FAILURE_RETRY_S
        # No stop: until the database answers (a cancellation still goes straight out).
        attempts = retrying(wait=doubling(first, ceiling), before_sleep=warn_before_retry(
            log, lambda _: f"run {self.state.run_id}: recording its failure"))
        await attempts(store.record_failure, self.state, error)

    # -- continue: false -------------------------------------------------------------------

    @property
    def stop_reason(self) -> str | None:
        """Why a hook stopped this run (Claude Code's ``continue: false``), or None."""
        reason = self.state.extra.get(STOP_KEY)
        return reason if isinstance(reason, str) else None

    def request_stop(self, reason: str) -> None:
        """Mark the run stopped; the first reason stays. The calls already running finish,
        no further call or model turn starts, and the run ends ``session_blocked``."""
        self.state.extra.setdefault(STOP_KEY, storable_text(reason))

    async def _end_stopped(self, reason: str) -> None:
        if not self.state.finished:
            await self.finish("session_blocked", error=f"a hook stopped the run: {reason}")

    def raise_if_stopped(self) -> None:
        """Raise RunStopped once the run is marked stopped (see ``request_stop``)."""
        if self.stop_reason is not None:
            raise RunStopped(self.stop_reason)

    # -- phases ----------------------------------------------------------------------------

    def build(self) -> bool:
        """Build the registry; on failure the run ends as ``blocked_build`` (fail closed)."""
        try:
            self.registry = self.registries(self.agent, self.services)
        except HookBuildError as exc:
            self.state.status = "blocked_build"
            self.state.error = str(exc)
            self.emit("error", {"error": str(exc), "status": "blocked_build"})
            self.emit("done", {"status": "blocked_build", "answer": None})
            return False
        return True

    def identity(self) -> CallIdentity:
        return CallIdentity(
            agent_id=self.agent.id,
            user_id=self.state.user_id,
            org_id=self.state.org_id,
            run_id=self.state.run_id,
            conversation_id=self.state.conversation_id,
            execution_path=self.lineage.execution_path,
            parent_agent_id=self.lineage.parent_agent_id,
            depth=self.lineage.depth,
            parent_session=self.lineage.parent_run_id,
            root_run_id=self.lineage.root_run_id,
            require_confirmation_for_all=self.agent.require_confirmation_for_all,
            emit=self.emit,
            transcript_path=self.transcript_path,
            message=self.state.message,
            settle=None if self._carrier is None else self._settle,
        )

    async def start_session(self, *, checkpoint_without_hooks: bool = True) -> bool:
        """Run SessionStart hooks once and write the initial prompt; False stops the run
        (also a run a hook stopped before a restart: every engine asks this first).

        ``checkpoint_without_hooks=False``: the engine checkpoints before anything of the
        run can happen (ReAct's model turn, the DAG's plan), so with no SessionStart hook
        there is nothing to keep here and the checkpoint is left out."""
        assert self.registry is not None
        if self.stop_reason is not None:
            # A hook stopped it before a restart, and it had not ended then: it ends now.
            await self._end_stopped(self.stop_reason)
            return False
        if self.state.session_started:
            return True
        self._keep_transcript([])
        ctx = HookContext(
            hook_point=HookPoint.SESSION_START,
            agent_id=self.agent.id,
            user_id=self.state.user_id,
            metadata={
                "org_id": self.state.org_id,
                "conversation_id": self.state.conversation_id,
                "run_id": self.state.run_id,
                "execution_path": self.lineage.execution_path,
                "parent_agent_id": self.lineage.parent_agent_id,
                "depth": self.lineage.depth,
                "message": self.state.message,
                "transcript_path": self.transcript_path,
            },
            emit=self.emit,
        )
        hookless = not checkpoint_without_hooks and not self.registry.hooks(
            HookPoint.SESSION_START)
        result = await self.registry.run_session_start(ctx)
        # Without SessionStart hooks nothing here is checkpointed (below): a run that stops
        # before its next checkpoint comes back here, and its session was announced then.
        announced = hookless and any(e.get("type") == "session_start"
                                     for e in self.state.trace)
        if not announced:
            self.emit("session_start", {
                "agent_id": self.agent.id,
                "allowed": result.allow,
                "error": result.error,
                "additional_context": result.additional_context,
                "side_effects": list(result.side_effects),
                "hooks": result.trace,
            })
        if not result.allow:
            await self.finish("session_blocked", error=result.error)
            return False
        system = self.agent.instructions or ""
        if result.additional_context:
            system = f"{system}\n\n{result.additional_context}" if system else (
                result.additional_context)
        self.state.messages = [
            {"role": "system", "content": system},
            {"role": "user", "content": self.state.message},
        ]
        self.state.session_started = True
        if self.lineage.depth == 0 and self.state.message:
            # The user's request, a trusted fact of the session for provenance (a
            # delegated child's message is its parent model's words, not the user's).
            try:
                await self.registry.facts.add(facts_session(self.identity()),
                                              Fact.request(self.state.message))
            except Exception as exc:  # the run fails closed, saying why (self.fail)
                raise FactsUnavailable(
                    "the user's request could not be kept in the session's facts, so no "
                    f"tool may run ({type(exc).__name__}: {exc})") from exc
        if not hookless:
            # What the hooks did (their context, their side effects) is kept before the
            # model is asked, so a run that stops later does not run them again. Without
            # hooks (and an engine that checkpoints next) the prompt is made again alike.
            await self.checkpoint()
        return True

    async def run_calls(self, calls: list[ToolCall]) -> list[ToolOutcome]:
        """Run one turn's calls concurrently, each through its own hook chain.

        Finished calls are recorded in the state as they finish, so a resumed run skips
        them and re-enters only the ones still in flight. A call that parks (waits for a
        person) stops the turn only once the others have finished. The call that finishes
        the turn is not checkpointed here: the caller checkpoints the whole turn next (a
        crash in between re-enters it, and the ledger answers with its recorded result).
        """
        self._keep_transcript(self.state.messages)
        in_flight = len(calls)

        async def one(call: ToolCall) -> ToolOutcome:
            nonlocal in_flight
            outcome = await self.run_call(call, checkpoint=False)
            in_flight -= 1
            if in_flight:  # others still run (or wait for a person): keep this result now
                await self.checkpoint()
            return outcome

        if len(calls) == 1:  # the common turn: no task of its own for the one call
            return [await one(calls[0])]
        results = await asyncio.gather(*(one(c) for c in calls), return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise first_to_raise(errors)
        return [r for r in results if isinstance(r, ToolOutcome)]

    def _keep_transcript(self, messages: list[dict[str, Any]]) -> None:
        # Hooks in Claude Code's style get the conversation so far as a transcript file.
        if self.registry is not None and any(
                getattr(h, "reads_transcript", False) for h in self.registry.hooks()):
            self.transcript_path = write_transcript(self.state.run_id, messages)

    async def run_call(self, call: ToolCall, *, checkpoint: bool = True) -> ToolOutcome:
        """One call of the run, its outcome recorded in the state (and checkpointed, unless
        the caller checkpoints it next)."""
        assert self.registry is not None
        # Every path's calls (DAG steps, workflow nodes, delegates) cross the arguments
        # boundary here; ids the engines build are hashed only past the column's width.
        call = admit_call(call, max_id=CALL_ID_COLUMN)
        done = self.state.outcomes.get(call.id)
        if done is not None:
            return ToolOutcome.from_dict(done)
        self.raise_if_stopped()  # a call that would start after the stop never runs
        resume_at: str | None = None
        # Only exactly the call that was interrupted resumes where its chain stopped; any
        # other call (a live one, or a later one re-using its id) runs every hook.
        interrupted = self.interrupted.pop(call.id, None) == call.name
        if self.resume_resolver is not None and interrupted:
            point = await self.resume_resolver(self.state, call)
            if point is not None:
                resume_at, args = point
                call = ToolCall(call.id, call.name, args)
        # A call whose child run parked with this run re-enters its tool, which resumes the
        # child; past the hooks that admitted it, unless it resumes at its own gate.
        child = parked_child(self.state, call_slot(call.id)) if interrupted else None
        if child is not None and resume_at is None:
            resume_at = ADMITTED
            call = ToolCall(call.id, call.name, dict(child["args"]))
        if not interrupted:
            # A call re-entered after it parked (or after its worker stopped) was announced
            # when it first started: the trace shows each call once.
            self.emit("tool_call", {"tool_call_id": call.id, "tool_name": call.name,
                                    "args": call.args})
        token = CURRENT_CALL.set(call.id)
        try:
            outcome = await self.guarded_call(call, resume_at, reenter=child is not None)
        finally:
            CURRENT_CALL.reset(token)
        if outcome.stop_reason:
            self.request_stop(outcome.stop_reason)
        self.state.outcomes[call.id] = outcome.to_dict()
        self.emit("tool_result" if outcome.allowed else "tool_blocked", outcome.to_dict())
        if checkpoint or self.stop_reason is not None:
            await self.checkpoint()
        # Every engine path (ReAct turns, DAG steps, workflow nodes, delegates) ends here.
        self.raise_if_stopped()
        return outcome

    async def guarded_call(self, call: ToolCall, resume_at: str | None, *,
                           reenter: bool = False) -> ToolOutcome:
        """One call through the guarded path with this run's registry and identity
        (``reenter``: its tool continues a child run parked with this run).

        Only the eval driver (hookgate.evals) overrides this, to bypass hooks on purpose.
        """
        assert self.registry is not None
        return await execute_tool_call(
            new_call(self.identity(), call, self.tools),
            registry=self.registry,
            ledger=self.ledger if self._carrier is None else _CarriedLedger(self),
            resume_at=resume_at,
            reenter=reenter,
        )


class _CarriedLedger:
    """The run's ledger with a store that carries it: the first claim after a model turn or
    a call's decision writes the run's checkpoint in its transaction (the claim is durable
    before the tool starts, as ever), and a call's result waits for the checkpoint that
    follows the call (written whatever its fence says; on a stop without one, on its
    own)."""

    def __init__(self, driver: RunDriver) -> None:
        self.driver = driver
        assert driver.ledger is not None
        self.ledger: ExecutionLedger = driver.ledger

    async def claim(self, run_id: str, tool_call_id: str, tool_name: str, args_sha256: str
                    ) -> PriorExecution | None:
        d = self.driver
        if d._unsaved and run_id == d.state.run_id:
            async with d._save_lock:
                if d._unsaved:
                    return await d._save((run_id, tool_call_id, tool_name, args_sha256))
        return await self.ledger.claim(run_id, tool_call_id, tool_name, args_sha256)

    async def finish(self, run_id: str, tool_call_id: str, observation: str, ok: bool) -> None:
        d = self.driver
        if run_id != d.state.run_id or storable_text(observation) != observation:
            # Another run's, or a result no store can hold: written (or refused) here, as
            # the call's own failure, before it reaches the run's state.
            await self.ledger.finish(run_id, tool_call_id, observation, ok)
            return
        d._finished.append(FinishedCall(run_id, tool_call_id, observation, ok))


def admit_calls(calls: list[ToolCall]) -> list[ToolCall]:
    """A model turn's calls as they may enter the run (see `hookgate.tools.arguments`):
    called before the turn is checkpointed, so nothing unstorable reaches the state."""
    return [admit_call(c) for c in calls]


def interrupted_calls(state: RunState) -> dict[str, str]:
    """The calls a stored run had started and not finished when it stopped (id → tool
    name): its trace shows their ``tool_call`` and no result. Empty for a fresh run."""
    if not state.session_started or state.finished:
        return {}
    started: dict[str, str] = {}
    for event in state.trace:
        kind, call_id = event.get("type"), event.get("tool_call_id")
        if not isinstance(call_id, str):
            continue
        if kind == "tool_call":
            started[call_id] = str(event.get("tool_name"))
        elif kind in ("tool_result", "tool_blocked"):
            started.pop(call_id, None)
    return started


def assistant_message(calls: list[ToolCall], content: str | None = None) -> dict[str, Any]:
    """The OpenAI-shaped assistant message that carries a turn's tool calls."""
    return {
        "role": "assistant",
        "content": content,
        "tool_calls": [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(c.args, ensure_ascii=False,
                                                                     default=str)},
            }
            for c in calls
        ],
    }


def tool_message(outcome: ToolOutcome) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": outcome.tool_call_id, "content": outcome.observation}
