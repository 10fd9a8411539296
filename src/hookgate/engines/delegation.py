"""Delegation: the ``call_agent`` tool, through which an agent runs one of its delegates.

An agent declares whom it may call in ``model_config_json.delegates`` (a list of agent
ids). ``call_agent`` is a Tool like any other, so the call passes the caller's hooks; it
then runs the delegate as a child run that builds the delegate's **own** registry (the
approval gate included), with the caller's user and org, a child run id of its own, and
``execution_path="delegate"``, ``parent_agent_id``, ``depth`` and ``parent_session`` (the
caller's run id) in its hooks' metadata.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from hookgate.agent import Agent
from hookgate.engines.children import (
    CURRENT_CALL,
    call_slot,
    park_child,
    parked_child,
    release_child,
)
from hookgate.engines.driver import STOP_KEY, Lineage, RunDriver
from hookgate.engines.events import EventSink, RunEvent
from hookgate.engines.interrupts import RunParked
from hookgate.engines.react import ReActEngine
from hookgate.engines.result import RunResult
from hookgate.engines.state import RunState, new_run_id
from hookgate.llm.base import ChatModel
from hookgate.tools.tool import Tool, tool

DELEGATE_TOOL = "call_agent"
DEFAULT_MAX_DEPTH = 3

#: Child events the caller's stream shows live: a person may have to act on them.
_FORWARDED = frozenset({"confirmation_pending", "confirmation_resolved"})


class DelegationError(Exception):
    """A delegation that did not happen or did not finish; the message says why."""


def declared_delegates(agent: Agent) -> list[str]:
    """The agent ids in ``model_config_json.delegates`` (none when absent)."""
    raw = (agent.model_config_json or {}).get("delegates")
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(x, str) and x for x in raw):
        raise DelegationError(
            f"agent '{agent.id}': model_config_json.delegates must be a list of agent ids")
    return list(raw)


@dataclass
class Delegation:
    """The agents a run may delegate to, the model each one uses, and the depth limit."""

    agents: Mapping[str, Agent]
    model_for: Callable[[str], ChatModel]
    max_depth: int = DEFAULT_MAX_DEPTH

    def equip(self, driver: RunDriver) -> None:
        """Give the driver's agent ``call_agent`` if it declares delegates."""
        names = _delegates_or_none(driver.agent)
        if names is not None:
            driver.tools[DELEGATE_TOOL] = self._tool(driver, names)

    def can_write(self, agent_id: str, seen: frozenset[str] = frozenset()) -> bool:
        """Whether the agent, or any agent it may delegate to, has a tool that writes."""
        agent = self.agents.get(agent_id)
        if agent is None or agent_id in seen:
            return False
        if any(t.writes for t in agent.tools):
            return True
        names = _delegates_or_none(agent) or []
        return any(self.can_write(n, seen | {agent_id}) for n in names)

    def _tool(self, caller: RunDriver, names: list[str]) -> Tool:
        # The tool closes over the calling run: that is where user, org and depth come from.
        async def call_agent(agent_id: str, message: str) -> str:
            return await self._delegate(caller, agent_id, message)

        listing = ", ".join(names) or "none (the declaration is malformed)"
        # Delegating to an agent that can write is itself a write, so a read-only rule on
        # the caller applies to the delegation before the delegate even starts.
        writes = any(self.can_write(n, frozenset({caller.agent.id})) for n in names)
        # A delegate's answer is a model's words, which may repeat what it read: untrusted
        # content (hookgate.provenance); what it read is a fact of the caller's session.
        return tool(name=DELEGATE_TOOL, writes=writes, untrusted_output=True, description=(
            f"Ask another agent to do a task and return its answer. Agents: {listing}."
        ))(call_agent)

    async def _delegate(self, caller: RunDriver, agent_id: str, message: str) -> str:
        declared = declared_delegates(caller.agent)
        if agent_id not in declared:
            raise DelegationError(
                f"agent '{caller.agent.id}' may delegate only to "
                f"{', '.join(declared) or 'no one'}; '{agent_id}' is not one of them")
        delegate = self.agents.get(agent_id)
        if delegate is None:
            raise DelegationError(f"no agent '{agent_id}' exists to delegate to")
        org = caller.state.org_id
        if org is not None and delegate.org_id is not None and delegate.org_id != org:
            raise DelegationError(
                f"agent '{agent_id}' belongs to org '{delegate.org_id}', not '{org}'")
        depth = caller.lineage.depth + 1
        if depth > self.max_depth:
            raise DelegationError(
                f"delegation depth limit {self.max_depth} reached: '{caller.agent.id}' "
                f"(depth {caller.lineage.depth}) cannot call '{agent_id}'")
        call_id = CURRENT_CALL.get()
        slot = call_slot(call_id) if call_id is not None else None
        parked = parked_child(caller.state, slot) if slot is not None else None
        lineage = Lineage("delegate", parent_agent_id=caller.agent.id, depth=depth,
                          parent_run_id=caller.state.run_id)
        if parked is not None:  # it parked with this run and resumes: announced already
            child_run_id = str(parked["state"]["run_id"])
        else:
            child_run_id = new_run_id()
            caller.emit("delegate_start", {"child_run_id": child_run_id, "agent_id": agent_id,
                                           "parent_agent_id": caller.agent.id,
                                           "depth": depth, "message": message})
        result = await self.run_child(delegate, message, parent=caller, lineage=lineage,
                                      run_id=child_run_id, slot=slot,
                                      args={"agent_id": agent_id, "message": message})
        caller.emit("delegate_end", {"child_run_id": child_run_id, "agent_id": agent_id,
                                     "status": result.status, "answer": result.answer,
                                     "error": result.error, "trace": result.trace})
        if result.status == "completed":
            return result.answer or ""
        if result.status == "blocked_build":
            raise DelegationError(
                f"delegate '{agent_id}' did not run: its hooks cannot be built: {result.error}")
        raise DelegationError(f"delegate '{agent_id}' ended '{result.status}': "
                              f"{result.error or 'no answer'}")

    async def run_child(self, agent: Agent, message: str, *, parent: RunDriver,
                        lineage: Lineage, run_id: str | None = None, slot: str | None = None,
                        args: dict[str, Any] | None = None) -> RunResult:
        """Run ``agent`` as a child of ``parent``'s run, with its own registry and run id.

        The child's approval events are shown on the parent's stream as they happen (with
        ``child_run_id``), so whoever watches the parent sees what is waiting for them.
        With a ``slot`` (where in the parent it runs; ``args``: the parent's call that runs
        it), a call of the child that waits for a person parks the root run with the
        child's state in the parent's, and the child resumes from there
        (hookgate.engines.children); without one it waits in memory.
        """
        engine = DelegatingReActEngine(
            self.model_for(agent.id), services=parent.services,
            registries=parent.registries, ledger=parent.ledger,
            delegation=self, resume_resolver=parent.resume_resolver)
        parked = parked_child(parent.state, slot) if slot is not None else None
        if parked is not None:
            state = RunState.model_validate(parked["state"])
        else:
            state = engine.new_state(agent, message, user_id=parent.state.user_id,
                                     org_id=parent.state.org_id,
                                     conversation_id=parent.state.conversation_id,
                                     run_id=run_id or new_run_id())
        if slot is not None:  # its calls name the stored run they may park
            lineage = replace(lineage, root_run_id=parent.lineage.root_run_id
                              or parent.state.run_id)
        try:
            result = await engine.execute(agent, state, sink=_forward_to(
                parent, state.run_id, agent.id), lineage=lineage)
        except RunParked:
            if slot is not None:
                park_child(parent.state, slot, state, args or {})
            raise
        if slot is not None:
            release_child(parent.state, slot)
        stop = state.extra.get(STOP_KEY)
        if isinstance(stop, str):
            # Claude Code's `continue: false` stops the whole session, not just the delegate:
            # the caller ends too, once the call (or node) that ran the child is recorded.
            parent.request_stop(stop)
        return result


def _delegates_or_none(agent: Agent) -> list[str] | None:
    raw = (agent.model_config_json or {}).get("delegates")
    if raw is None:
        return None
    try:
        return declared_delegates(agent)
    except DelegationError:
        return []  # the tool exists and says what is wrong when called


def _forward_to(parent: RunDriver, child_run_id: str, agent_id: str) -> EventSink:
    def sink(event: RunEvent) -> None:
        if event.type in _FORWARDED:
            data: dict[str, Any] = {**event.data, "child_run_id": child_run_id,
                                    "delegate_agent_id": agent_id}
            parent.emit(event.type, data)

    return sink


class DelegatingReActEngine(ReActEngine):
    """A ReActEngine whose agents get ``call_agent`` when they declare delegates."""

    def __init__(self, llm: ChatModel, *, delegation: Delegation | None = None,
                 **kwargs: Any) -> None:
        super().__init__(llm, **kwargs)
        self.delegation = delegation

    def _driver(self, agent: Agent, state: Any, sink: EventSink,
                lineage: Lineage | None) -> RunDriver:
        driver = super()._driver(agent, state, sink, lineage)
        if self.delegation is not None:
            self.delegation.equip(driver)
        return driver
