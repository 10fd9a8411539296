"""The new execution paths hold by construction (AST scans of src/hookgate, plus the engines
the server can build): only the guarded path calls tools, only the driver and the eval
runner enter it, and only hookgate.evals can bypass hooks — nothing the server, the run
manager, the configuration or the workflow and delegation code uses reaches it."""

from __future__ import annotations

import ast

import pytest

from hookgate import ScriptedLLM
from hookgate.engines.delegation import Delegation
from hookgate.engines.driver import RunDriver
from hookgate.runs.runner import ENGINES
from tests.engines.world import Bank, make_agent
from tests.source_trees import module_names, source_trees


def calls_named(tree: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and (
        getattr(n.func, "attr", None) == name or getattr(n.func, "id", None) == name)]


def imports_evals(tree: ast.AST) -> bool:
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.startswith("hookgate.evals")
                                                for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "hookgate.evals"):
            return True
    return False


def test_only_the_driver_the_eval_runner_and_the_mcp_gateway_enter_the_guarded_path(
        ) -> None:
    entering = sorted(name for name, tree in source_trees().items()
                      if calls_named(tree, "execute_tool_call"))
    assert entering == ["engines/driver.py", "evals/runner.py", "mcp/gateway.py"]


def test_only_hookgate_evals_asks_for_hooks_to_be_bypassed() -> None:
    bypassing = sorted(
        name for name, tree in source_trees().items()
        for call in calls_named(tree, "execute_tool_call")
        for kw in call.keywords
        if kw.arg == "hooks_bypassed" and not (
            isinstance(kw.value, ast.Constant) and kw.value.value is False))
    assert bypassing == ["evals/runner.py"]


@pytest.mark.parametrize("name", [n for n in module_names() if not n.startswith("evals/")
                                  and n != "cli/eval_cmd.py" and n != "cli/main.py"])
def test_no_other_module_imports_the_evals(name: str) -> None:
    assert not imports_evals(source_trees()[name]), f"{name} imports hookgate.evals"


def test_delegation_and_workflow_nodes_run_tools_only_through_the_driver() -> None:
    for name in ("engines/delegation.py", "workflows/runner.py", "engines/dag.py"):
        tree = source_trees()[name]
        assert not calls_named(tree, "execute_tool_call"), name
        assert not [n for n in ast.walk(tree) if isinstance(n, ast.Attribute)
                    and n.attr in ("_invoke", "_fn")], name
    # Tool nodes and DAG steps go through run_call; agent nodes and delegates run engines.
    assert calls_named(source_trees()["workflows/runner.py"], "run_call")
    assert calls_named(source_trees()["engines/dag.py"], "run_call")
    assert calls_named(source_trees()["engines/delegation.py"], "execute")


@pytest.mark.parametrize("engine_name", sorted(ENGINES))
def test_every_engine_the_server_builds_uses_the_unmodified_guarded_path(
        engine_name: str) -> None:
    bank = Bank()
    agent = make_agent(bank, delegates=["buyer"])
    llm = ScriptedLLM([{"answer": "x"}])
    engine = ENGINES[engine_name](llm, delegation=Delegation({"buyer": agent}, lambda _: llm))
    driver = engine._driver(agent, engine.new_state(agent, "hi"), lambda e: None, None)
    assert type(driver).guarded_call is RunDriver.guarded_call
    assert "hooks_bypassed" not in ENGINES[engine_name].__init__.__code__.co_varnames


def test_only_the_eval_driver_overrides_the_guarded_call() -> None:
    overriding = sorted(name for name, tree in source_trees().items() for n in ast.walk(tree)
                        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
                        and n.name == "guarded_call")
    assert overriding == ["engines/driver.py", "evals/runner.py"]
    assert calls_named(source_trees()["workflows/runner.py"], "RunDriver")  # the driver itself
