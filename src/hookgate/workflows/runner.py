"""`WorkflowRunner`: runs a declared workflow, every tool call through the hooks.

Before anything runs, the workflow is checked against the agents it names and the registry
of every agent involved is built (fail closed: one that cannot be built stops the run, and
the error names the node). Tool nodes then take the guarded path with the ``as_agent``'s
registry and identity, agent nodes run their agent with its own registry, and condition
nodes are safe expressions; all with ``execution_path="workflow"``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

from hookgate.agent import Agent
from hookgate.engines.children import node_slot, parked_child
from hookgate.engines.delegation import Delegation
from hookgate.engines.driver import Lineage, ResumeResolver, RunDriver, RunStore
from hookgate.engines.events import EventSink, RunEvent
from hookgate.engines.graph import Readiness, run_graph, settle
from hookgate.engines.registries import RegistryBuilder, builder_or_default
from hookgate.engines.result import RunResult
from hookgate.engines.state import RunState
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.services import HookServices
from hookgate.llm.base import ChatModel
from hookgate.telemetry.names import OP_INVOKE_WORKFLOW
from hookgate.telemetry.runs import traced_run
from hookgate.tools.arguments import ArgumentsRefused, parse_arguments
from hookgate.tools.calls import ToolCall
from hookgate.tools.ledger import ExecutionLedger, InMemoryLedger
from hookgate.workflows.expressions import ExpressionError, evaluate, render
from hookgate.workflows.schema import AgentNode, ConditionNode, Workflow, WorkflowError

ENGINE_NAME = "workflow"


class WorkflowRunner:
    """Runs the workflows it is given over a set of agents and their models."""

    name = ENGINE_NAME

    def __init__(
        self,
        workflows: Mapping[str, Workflow],
        agents: Mapping[str, Agent],
        model_for: Callable[[str], ChatModel],
        *,
        services: HookServices | None = None,
        registries: RegistryBuilder | None = None,
        ledger: ExecutionLedger | None = None,
        store: RunStore | None = None,
        resume_resolver: ResumeResolver | None = None,
    ) -> None:
        self.workflows = workflows
        self.agents = agents
        self.services = services or HookServices()
        #: Builds the registries of the workflow's agent and of every agent node.
        self.registries = builder_or_default(registries)
        self.ledger = ledger if ledger is not None else InMemoryLedger()
        self.store = store
        self.resume_resolver = resume_resolver
        self.delegation = Delegation(agents, model_for)

    # -- public API --------------------------------------------------------------------------

    def new_state(self, workflow_id: str, message: str = "", *, user_id: str | None = None,
                  org_id: str | None = None, conversation_id: str | None = None) -> RunState:
        workflow = self._workflow(workflow_id)
        agent = self.agents.get(workflow.as_agent)
        state = RunState(agent_id=workflow.as_agent, user_id=user_id,
                         org_id=org_id if org_id is not None else (agent.org_id if agent
                                                                   else None),
                         conversation_id=conversation_id, message=message, engine=self.name)
        state.extra["workflow"] = {"id": workflow.id, "nodes": {}}
        return state

    async def run(self, workflow_id: str, message: str = "", *, user_id: str | None = None,
                  org_id: str | None = None, conversation_id: str | None = None) -> RunResult:
        state = self.new_state(workflow_id, message, user_id=user_id, org_id=org_id,
                               conversation_id=conversation_id)
        return await self.execute(state)

    async def stream(self, workflow_id: str, message: str = "", *, user_id: str | None = None,
                     org_id: str | None = None) -> AsyncIterator[RunEvent]:
        """Yield the run's events as they happen; the last one is ``done``."""
        state = self.new_state(workflow_id, message, user_id=user_id, org_id=org_id)
        queue: asyncio.Queue[RunEvent | None] = asyncio.Queue()
        task = asyncio.create_task(self.execute(state, sink=queue.put_nowait))
        task.add_done_callback(lambda _t: queue.put_nowait(None))
        try:
            while (event := await queue.get()) is not None:
                yield event
            task.result()
        finally:
            if not task.done():
                task.cancel()

    async def execute(self, state: RunState, *, sink: EventSink | None = None) -> RunResult:
        """Run (or resume) the workflow run ``state``; a finished run is returned as it is."""
        workflow = self._workflow(state.extra["workflow"]["id"])
        agent = self.agents.get(workflow.as_agent)
        if agent is None:
            raise WorkflowError(f"workflow '{workflow.id}': no agent '{workflow.as_agent}' "
                                "(as_agent)")
        d = RunDriver(agent, state, sink or (lambda e: None), services=self.services,
                      registries=self.registries, ledger=self.ledger, store=self.store,
                      resume_resolver=self.resume_resolver,
                      lineage=Lineage(execution_path="workflow"))
        if not state.finished:
            await d.run_to_end(self._drive(d, workflow))
        return RunResult.from_state(state)

    # -- the run -----------------------------------------------------------------------------

    def _workflow(self, workflow_id: str) -> Workflow:
        workflow = self.workflows.get(workflow_id)
        if workflow is None:
            known = ", ".join(self.workflows) or "none"
            raise WorkflowError(f"no workflow '{workflow_id}' (workflows: {known})")
        return workflow

    @traced_run(OP_INVOKE_WORKFLOW)
    async def _drive(self, d: RunDriver, workflow: Workflow) -> None:
        problem = self._mismatch(workflow, d.agent)
        if problem is not None:
            await d.finish("failed", error=f"workflow '{workflow.id}' cannot run, nothing "
                                           f"ran: {problem}")
            return
        if not d.build():
            await d.checkpoint()
            return
        broken = self._unbuildable(workflow)
        if broken is not None:
            await d.finish("blocked_build", error=broken)
            return
        if not await d.start_session():
            return
        await d.run_to_end(self._nodes(d, workflow))

    def _mismatch(self, workflow: Workflow, as_agent: Agent) -> str | None:
        tools = as_agent.toolbox()
        for node in workflow.nodes:
            if node.type == "tool" and node.tool not in tools:
                return (f"node '{node.id}' uses tool {node.tool!r}, which agent "
                        f"'{as_agent.id}' does not have (tools: {', '.join(tools) or 'none'})")
            if isinstance(node, AgentNode) and node.agent not in self.agents:
                return f"node '{node.id}' runs unknown agent '{node.agent}'"
        return None

    def _unbuildable(self, workflow: Workflow) -> str | None:
        # Every agent node's registry is built up front too, so a broken declaration stops
        # the workflow before its first node runs, not half-way through.
        for node in workflow.nodes:
            if isinstance(node, AgentNode):
                try:
                    self.registries(self.agents[node.agent], self.services)
                except HookBuildError as exc:
                    return f"node '{node.id}': {exc}"
        return None

    async def _nodes(self, d: RunDriver, workflow: Workflow) -> None:
        nodes: dict[str, dict[str, Any]] = d.state.extra["workflow"]["nodes"]
        for node_id, record in nodes.items():
            if record["status"] == "running" and parked_child(
                    d.state, node_slot(node_id)) is not None:
                continue  # its agent run parked with this run: it resumes when run again
            if record["status"] == "running":  # an agent run cut short by a restart
                nodes[node_id] = {"status": "failed", "output": None, "reason": (
                    "interrupted by a restart; not run again since its outcome is unknown")}

        def names() -> dict[str, Any]:
            outputs = {k: v["output"] for k, v in nodes.items() if v["status"] == "ok"}
            return {**outputs, "outputs": outputs, "input": d.state.message}

        def readiness(node_id: str) -> Readiness:
            for edge in workflow.incoming(node_id):
                source = nodes.get(edge.source)
                if source is None or source["status"] == "running":
                    return "wait", ""
                if source["status"] != "ok":
                    return "skip", f"node '{edge.source}' was {source['status']}"
                if edge.when is not None and bool(source["output"]) != edge.when:
                    return "skip", f"condition '{edge.source}' is {bool(source['output'])}"
            return "run", ""

        async def skip(node_id: str, reason: str) -> None:
            nodes[node_id] = {"status": "skipped", "output": None, "reason": reason}
            d.emit("step_skipped", {"node_id": node_id, "reason": reason})
            await d.checkpoint()

        async def run(node_id: str) -> None:
            node = workflow.node(node_id)
            try:
                if isinstance(node, ConditionNode):
                    record = {"status": "ok", "output": bool(evaluate(node.expr, names())),
                              "reason": None}
                elif isinstance(node, AgentNode):
                    record = await self._agent_node(d, node, render(node.message, names()),
                                                    nodes)
                else:
                    outcome = settle(await d.run_call(ToolCall(
                        f"node_{node.id}", node.tool, render(node.args, names()))))
                    record = {"status": outcome["status"], "output": _value(
                        outcome["result"]), "reason": outcome["reason"]}
            except ExpressionError as exc:
                record = {"status": "failed", "output": None, "reason": f"{exc}"}
            nodes[node_id] = record
            d.emit("node_result", {"node_id": node_id, "node_type": node.type, **record})
            await d.checkpoint()
            d.raise_if_stopped()  # an agent node whose hook answered `continue: false`

        await run_graph([n.id for n in workflow.nodes],
                        lambda n: n in nodes and nodes[n]["status"] != "running",
                        readiness, run, skip)
        last = workflow.output or next(
            (n.id for n in reversed(workflow.nodes) if nodes[n.id]["status"] == "ok"), None)
        output = nodes[last]["output"] if last is not None else None
        answer = output if isinstance(output, str) else "" if output is None else json.dumps(
            output, ensure_ascii=False, default=str)
        await d.finish("completed", answer=answer)

    async def _agent_node(self, d: RunDriver, node: AgentNode, message: str,
                          nodes: dict[str, dict[str, Any]]) -> dict[str, Any]:
        agent = self.agents[node.agent]
        child = f"{d.state.run_id}.{node.id}"
        nodes[node.id] = {"status": "running", "output": None, "reason": None,
                          "child_run_id": child}
        await d.checkpoint()
        result = await self.delegation.run_child(
            agent, message, parent=d, lineage=Lineage(execution_path="workflow"),
            run_id=child, slot=node_slot(node.id), args={"message": message})
        d.emit("agent_node", {"node_id": node.id, "agent_id": agent.id, "child_run_id": child,
                              "status": result.status, "trace": result.trace})
        if result.status == "completed":
            return {"status": "ok", "output": result.answer, "reason": None}
        return {"status": "blocked" if result.status == "blocked_build" else "failed",
                "output": None, "reason": f"agent '{agent.id}' ended '{result.status}': "
                                          f"{result.error or 'no answer'}"}


def _value(observation: str) -> Any:
    # A tool's JSON result is data the next nodes can use (``quote.amount``); text stays text,
    # and so does JSON the arguments' rules refuse (NaN, 1e400, a lone surrogate, too deep).
    try:
        return parse_arguments(observation)
    except ArgumentsRefused:
        return observation
