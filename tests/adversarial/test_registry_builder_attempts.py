"""A registry builder that fails never lets a call through: on the ReAct, DAG and workflow
paths, a builder that refuses (HookBuildError) or crashes ends the run before any tool runs."""

from __future__ import annotations

from typing import Any

import pytest

from hookgate import Agent, DAGEngine, HookServices, ReActEngine, ScriptedLLM
from hookgate.hooks.errors import HookBuildError
from hookgate.hooks.registry import HookRegistry
from hookgate.workflows import WorkflowRunner, parse_workflow
from tests.adversarial_tally import Tally
from tests.engines.world import Bank, make_agent

PAY = {"name": "oa__purchase_pay", "args": {"amount": 10, "vendor": "ACME"}, "id": "c1"}


def refusing(agent: Agent, services: HookServices) -> HookRegistry:
    raise HookBuildError(f"agent '{agent.id}': refused", agent_id=agent.id)


def crashing(agent: Agent, services: HookServices) -> HookRegistry:
    raise RuntimeError("the builder fell over")


async def run_on(path: str, bank: Bank, builder: Any) -> str:
    agent = make_agent(bank, "buyer")
    if path == "react":
        llm = ScriptedLLM([{"tool_calls": [PAY]}, {"answer": "x"}])
        return (await ReActEngine(llm, registries=builder).run(agent, "pay")).status
    if path == "dag":
        llm = ScriptedLLM([{"plan": {"steps": [{"id": "s", "depends_on": [],
                                                "tool": PAY["name"], "args": PAY["args"]}]}},
                           {"answer": "x"}])
        return (await DAGEngine(llm, registries=builder).run(agent, "pay")).status
    workflow = parse_workflow({"id": "w", "as_agent": "buyer", "edges": [], "nodes": [
        {"id": "pay", "type": "tool", "tool": PAY["name"], "args": PAY["args"]}]})
    runner = WorkflowRunner({"w": workflow}, {"buyer": agent}, lambda _: ScriptedLLM([]),
                            registries=builder)
    return (await runner.run("w")).status


@pytest.mark.parametrize("path", ["react", "dag", "workflow"])
@pytest.mark.parametrize(("builder", "status"), [(refusing, "blocked_build"),
                                                 (crashing, "failed")],
                         ids=["refusing", "crashing"])
async def test_a_failing_registry_builder_runs_no_tool(path: str, builder: Any, status: str,
                                                       attempt: Tally) -> None:
    bank = Bank()
    got = await run_on(path, bank, builder)
    attempt.record(f"payment past a {builder.__name__} registry builder ({path})",
                   bool(bank.payments))
    assert bank.payments == []
    assert got == status
