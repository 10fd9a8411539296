"""Engines take their registry builder (decision 0005): ``registries=`` builds every
registry of a run, delegates' included; without one an engine builds the agent's declared
hooks and the approval gate, even when an engine module is imported before anything else."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

from hookgate import Agent, DAGEngine, HookServices, ReActEngine, ScriptedLLM
from hookgate.catalog.build import build_registry
from hookgate.engines import DelegatingReActEngine, Delegation, registries
from hookgate.engines.registries import NoRegistryBuilder, default_builder
from hookgate.hooks.registry import HookRegistry
from hookgate.workflows import WorkflowRunner, parse_workflow
from tests.engines.world import GATED, READ_ONLY, Bank, make_agent


def pay(amount: float, call_id: str = "c1") -> dict[str, Any]:
    return {"tool_calls": [{"name": "oa__purchase_pay",
                            "args": {"amount": amount, "vendor": "ACME"}, "id": call_id}]}


def note(call_id: str = "n1") -> dict[str, Any]:
    return {"tool_calls": [{"name": "db__write_note", "args": {"text": "hi"}, "id": call_id}]}


class Recording:
    """A builder that builds the catalog's registry and remembers whom it built for."""

    def __init__(self) -> None:
        self.built: list[str] = []

    def __call__(self, agent: Agent, services: HookServices) -> HookRegistry:
        self.built.append(agent.id)
        return build_registry(agent, services)


async def test_an_engine_made_without_a_builder_runs_the_declared_hooks_and_the_gate() -> None:
    bank = Bank()
    agent = make_agent(bank, "buyer", {"name": "tests.hookfixtures:BlockTool", "params": {
        "tool": "db__write_note", "error": "notes are frozen"}})
    llm = ScriptedLLM([pay(GATED), note(), {"answer": "done"}])
    engine = ReActEngine(llm)

    result = await engine.run(agent, "pay and note", user_id="alice")

    assert engine.registries is default_builder()
    assert bank.payments == [] and bank.notes == []
    blocked = [e for e in result.trace if e["type"] == "tool_blocked"]
    assert [e["tool_name"] for e in blocked] == ["oa__purchase_pay", "db__write_note"]
    assert "approval" in blocked[0]["error"] and blocked[1]["error"] == "notes are frozen"


def test_every_engine_made_without_a_builder_takes_the_installed_default() -> None:
    llm = ScriptedLLM([{"answer": "x"}])
    runner = WorkflowRunner({}, {}, lambda _: llm)
    assert {ReActEngine(llm).registries, DAGEngine(llm).registries,
            DelegatingReActEngine(llm).registries, runner.registries} == {default_builder()}


async def test_the_builder_passed_in_builds_the_run_and_every_delegates_registry() -> None:
    bank = Bank()
    buyer = make_agent(bank, "buyer", delegates=["payer"])
    payer = make_agent(bank, "payer", READ_ONLY)
    models = {
        "buyer": ScriptedLLM([{"tool_calls": [{"name": "call_agent", "id": "d1", "args": {
            "agent_id": "payer", "message": "note it"}}]}, {"answer": "asked"}]),
        "payer": ScriptedLLM([note(), {"answer": "could not"}]),
    }
    builder = Recording()
    engine = DelegatingReActEngine(
        models["buyer"], registries=builder,
        delegation=Delegation({"buyer": buyer, "payer": payer}, models.__getitem__))

    result = await engine.run(buyer, "get it noted", user_id="alice", org_id="acme")

    assert result.status == "completed", result.error
    assert builder.built == ["buyer", "payer"]
    assert bank.notes == []  # the delegate's own read-only hook, from the same builder


async def test_a_workflow_builds_its_agent_and_every_agent_node_with_the_builder() -> None:
    bank = Bank()
    agents = {"buyer": make_agent(bank, "buyer"), "noter": make_agent(bank, "noter")}
    workflow = parse_workflow({
        "id": "ask_noter", "as_agent": "buyer",
        "nodes": [{"id": "ask", "type": "agent", "agent": "noter", "message": "say hi"}],
        "edges": [],
    })
    builder = Recording()
    runner = WorkflowRunner({workflow.id: workflow}, agents,
                            lambda _: ScriptedLLM([{"answer": "hi"}]), registries=builder)

    result = await runner.run("ask_noter", user_id="alice")

    assert result.status == "completed", result.error
    assert sorted(set(builder.built)) == ["buyer", "noter"]


def test_without_a_default_an_engine_without_a_builder_is_refused(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registries, "_default", None)
    llm = ScriptedLLM([{"answer": "x"}])
    for make in (lambda: ReActEngine(llm), lambda: DAGEngine(llm),
                 lambda: WorkflowRunner({}, {}, lambda _: llm)):
        with pytest.raises(NoRegistryBuilder, match="registries="):
            make()
    assert ReActEngine(llm, registries=build_registry).registries is build_registry


def test_installing_a_default_returns_the_one_it_replaces(
        monkeypatch: pytest.MonkeyPatch) -> None:
    catalog_default = default_builder()
    monkeypatch.setattr(registries, "_default", catalog_default)
    builder = Recording()
    assert registries.use_default_builder(builder) is catalog_default
    assert ReActEngine(ScriptedLLM([{"answer": "x"}])).registries is builder


PROBE = """
import asyncio, json, sys
from hookgate.engines.react import ReActEngine
from hookgate.engines.registries import default_builder
from hookgate.llm.scripted import ScriptedLLM
catalog_loaded = any(m.startswith("hookgate.catalog") for m in sys.modules)
from tests.engines.world import GATED, Bank, make_agent
bank = Bank()
turns = [{"tool_calls": [{"name": "oa__purchase_pay", "id": "c1",
                          "args": {"amount": GATED, "vendor": "ACME"}}]}, {"answer": "x"}]
result = asyncio.run(ReActEngine(ScriptedLLM(turns)).run(make_agent(bank), "pay"))
print(json.dumps({"builder": default_builder().__qualname__, "before": catalog_loaded,
                  "payments": bank.payments,
                  "blocked": [e["tool_name"] for e in result.trace
                              if e["type"] == "tool_blocked"]}))
"""


def test_an_engine_module_imported_first_still_builds_the_gate() -> None:
    out = subprocess.run([sys.executable, "-c", PROBE], check=True, capture_output=True,
                         text=True, timeout=60).stdout
    seen = json.loads(out.splitlines()[-1])
    assert seen == {"builder": "_catalog_registry", "before": False, "payments": [],
                    "blocked": ["oa__purchase_pay"]}
