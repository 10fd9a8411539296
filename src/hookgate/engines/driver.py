"""The run plumbing every engine shares: build the registry, start the session, record
events, checkpoint the state, and push a turn's tool calls through the guarded path.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from hookgate.agent import Agent
from hookgate.catalog.build import build_registry
from hookgate.catalog.services import HookServices
from hookgate.engines.events import EventSink, RunEvent
from hookgate.engines.interrupts import first_to_raise
from hookgate.engines.state import RunState
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.model import HookContext, HookPoint
from hookgate.hooks.registry import HookRegistry
from hookgate.llm.base import ModelError
from hookgate.tools.calls import CallIdentity, ExecutionPath, ToolCall, ToolOutcome
from hookgate.tools.guarded import execute_tool_call
from hookgate.tools.ledger import ExecutionLedger
from hookgate.tools.tool import Tool


class RunStore(Protocol):
    """Where checkpoints go (the server's database; nothing for a plain library run)."""

    async def save(self, state: RunState) -> None: ...


#: Given a run and an in-flight call, where its PreToolUse chain stopped: (hook name, args
#: that hook saw), or None to run the chain from the start.
ResumeResolver = Callable[[RunState, ToolCall], Awaitable[tuple[str, dict[str, Any]] | None]]


@dataclass(slots=True)
class Lineage:
    """Where a run sits in a delegation tree."""

    execution_path: ExecutionPath = "react"
    parent_agent_id: str | None = None
    depth: int = 0


class RunDriver:
    """One run of one agent: the state, its registry, and the event and checkpoint flow."""

    def __init__(
        self,
        agent: Agent,
        state: RunState,
        sink: EventSink,
        *,
        services: HookServices,
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
        self.ledger = ledger
        self.store = store
        self.resume_resolver = resume_resolver
        self.lineage = lineage
        self.tools: dict[str, Tool] = {**agent.toolbox(), **(extra_tools or {})}
        self.registry: HookRegistry | None = None
        self._save_lock = asyncio.Lock()
        self._pending_saves: set[asyncio.Task[None]] = set()

    # -- events and checkpoints ------------------------------------------------------------

    def emit(self, type_: str, data: dict[str, Any]) -> None:
        event = RunEvent(type_, data, seq=len(self.state.trace) + 1)
        self.state.trace.append(event.to_dict())
        if type_ == "confirmation_pending":
            self.state.status = "awaiting_approval"
            self._checkpoint_soon()
        elif type_ == "confirmation_resolved" and self.state.status == "awaiting_approval":
            self.state.status = "running"
            self._checkpoint_soon()
        self._sink(event)

    def _checkpoint_soon(self) -> None:
        # emit() is synchronous; the status change is saved by a task of its own so that
        # readers of the stored run see "awaiting_approval" while a person is asked.
        if self.store is None:
            return
        task = asyncio.get_running_loop().create_task(self.checkpoint())
        self._pending_saves.add(task)
        task.add_done_callback(self._pending_saves.discard)

    async def checkpoint(self) -> None:
        if self.store is None:
            return
        async with self._save_lock:
            await self.store.save(self.state)

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

    async def run_to_end(self, body: Awaitable[None]) -> None:
        """Await an engine's main loop; a model error or any other exception ends the run
        as ``failed`` with the reason, so its stream closes instead of hanging."""
        try:
            await body
        except asyncio.CancelledError:
            raise
        except ModelError as exc:
            await self.finish("failed", error=f"model error: {exc}")
        except Exception as exc:
            await self.finish("failed", error=f"{type(exc).__name__}: {exc}")

    # -- phases ----------------------------------------------------------------------------

    def build(self) -> bool:
        """Build the registry; on failure the run ends as ``blocked_build`` (fail closed)."""
        try:
            self.registry = build_registry(self.agent, self.services)
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
            require_confirmation_for_all=self.agent.require_confirmation_for_all,
            emit=self.emit,
        )

    async def start_session(self) -> bool:
        """Run SessionStart hooks once and write the initial prompt; False stops the run."""
        assert self.registry is not None
        if self.state.session_started:
            return True
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
            },
            emit=self.emit,
        )
        result = await self.registry.run_session_start(ctx)
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
        await self.checkpoint()
        return True

    async def run_calls(self, calls: list[ToolCall]) -> list[ToolOutcome]:
        """Run one turn's calls concurrently, each through its own hook chain.

        Finished calls are recorded in the state as they finish, so a resumed run skips
        them and re-enters only the ones still in flight. A call that parks (waits for a
        person) stops the turn only once the others have finished.
        """
        results = await asyncio.gather(*(self.run_call(c) for c in calls),
                                       return_exceptions=True)
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            raise first_to_raise(errors)
        return [r for r in results if isinstance(r, ToolOutcome)]

    async def run_call(self, call: ToolCall) -> ToolOutcome:
        assert self.registry is not None
        done = self.state.outcomes.get(call.id)
        if done is not None:
            return ToolOutcome.from_dict(done)
        resume_at: str | None = None
        if self.resume_resolver is not None:
            point = await self.resume_resolver(self.state, call)
            if point is not None:
                resume_at, args = point
                call = ToolCall(call.id, call.name, args)
        self.emit("tool_call", {"tool_call_id": call.id, "tool_name": call.name,
                                "args": call.args})
        outcome = await self.guarded_call(call, resume_at)
        self.state.outcomes[call.id] = outcome.to_dict()
        self.emit("tool_result" if outcome.allowed else "tool_blocked", outcome.to_dict())
        await self.checkpoint()
        return outcome

    async def guarded_call(self, call: ToolCall, resume_at: str | None) -> ToolOutcome:
        """One call through the guarded path with this run's registry and identity.

        Only the eval driver (hookgate.evals) overrides this, to bypass hooks on purpose.
        """
        assert self.registry is not None
        return await execute_tool_call(
            call,
            tools=self.tools,
            registry=self.registry,
            identity=self.identity(),
            ledger=self.ledger,
            resume_at=resume_at,
        )


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
