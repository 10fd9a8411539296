"""One typed call for every caller, by construction: `new_call` is the only way to make the
`GuardedCall` the guarded path takes, and `converted_arguments` the only place a tool's
arguments are validated and converted — on the engines, the MCP gateway, evals and every
outside path (the guarded-call API, Claude Code, Codex). import-linter cannot say "only this
module constructs that class", so these scans of src/hookgate (AST, no imports) say it, and
the value itself refuses to be made any other way."""

from __future__ import annotations

import ast
import dataclasses

import pytest

from hookgate.agent import Agent
from hookgate.external.call import build_call
from hookgate.external.policy import CallRules
from hookgate.tools import CallIdentity, ToolArgumentsError, ToolCall, tool
from hookgate.tools.guarded_call import GuardedCall, RefusedCall, new_call
from tests.source_trees import source_trees

OWNER = "tools/guarded_call.py"


def calls(tree: ast.AST, name: str) -> list[ast.Call]:
    return [n for n in ast.walk(tree) if isinstance(n, ast.Call) and (
        getattr(n.func, "attr", None) == name or getattr(n.func, "id", None) == name)]


def is_super(call: ast.Call) -> bool:
    owner = getattr(call.func, "value", None)
    return isinstance(owner, ast.Call) and getattr(owner.func, "id", None) == "super"


def claims_registries(tree: ast.AST) -> set[str]:
    """Names bound to joserfc's ``JWTClaimsRegistry`` (whose ``validate`` checks a token's
    claims, not a tool's arguments)."""
    return {target.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Call)
            and getattr(node.value.func, "attr", None) == "JWTClaimsRegistry"
            for target in node.targets if isinstance(target, ast.Name)}


def on_claims_registry(call: ast.Call, registries: set[str]) -> bool:
    owner = getattr(call.func, "value", None)
    return isinstance(owner, ast.Name) and owner.id in registries


def test_only_the_one_constructor_makes_the_typed_call() -> None:
    making = sorted(name for name, tree in source_trees().items() if calls(tree, "GuardedCall"))
    assert making == [OWNER]


def test_arguments_are_validated_and_converted_in_one_place() -> None:
    # A tool's own validate is called by converted_arguments only (a Tool subclass may
    # extend it through super()); every path, a hook's rewrite, an approver's edit and the
    # Cedar hook's facts go through that function.
    validating = sorted(name for name, tree in source_trees().items()
                        for call in calls(tree, "validate")
                        if isinstance(call.func, ast.Attribute) and not is_super(call)
                        and not on_claims_registry(call, claims_registries(tree)))
    assert validating == [OWNER]


def test_every_caller_of_the_guarded_path_builds_its_call_with_new_call() -> None:
    entering = {name for name, tree in source_trees().items()
                if calls(tree, "execute_tool_call") or calls(tree, "decide_call")}
    building = {name for name, tree in source_trees().items() if calls(tree, "new_call")}
    assert entering - {"tools/guarded.py"} == {
        "engines/driver.py", "evals/runner.py", "mcp/gateway.py", "external/core.py"}
    # The external core decides calls only the external constructor made (by new_call).
    assert building - {OWNER} == {
        "engines/driver.py", "evals/runner.py", "mcp/gateway.py", "external/call.py"}
    assert {name for name, tree in source_trees().items() if calls(tree, "build_call")} == {
        "external/calls.py", "claude_code/backend.py",
        "coding_agents/flow.py"}


def test_a_typed_call_made_another_way_refuses_to_exist() -> None:
    pay = tool(_pay)
    made = new_call(_identity(), ToolCall("c1", pay.name, {"amount": "12.5"}), {pay.name: pay})
    assert isinstance(made, GuardedCall) and made.arguments == {"amount": 12.5}
    with pytest.raises(TypeError, match="new_call"):
        GuardedCall(_identity(), "alice", "c1", pay, {"amount": "lots"})
    with pytest.raises(TypeError, match="new_call"):
        dataclasses.replace(made, arguments={"amount": "lots"})
    refused = new_call(_identity(), ToolCall("c1", pay.name, {"amount": "lots"}),
                       {pay.name: pay})
    assert isinstance(refused, RefusedCall) and refused.status == "invalid"


def test_the_engines_and_the_outside_path_convert_a_declared_tools_arguments_alike() -> None:
    pay = tool(requires_confirmation=lambda a: a["amount"] > 50_000)(_pay)
    agent = Agent(id="buyer", name="buyer", instructions="", tools=[pay])
    engine = new_call(_identity(), ToolCall("c1", pay.name, {"amount": "60000"}),
                      {pay.name: pay})
    outside = build_call(agent, CallRules(), user_id="alice", initiator="alice",
                         org_id=None, session_id="s", call_id="c1", run_id="r",
                         tool_name=pay.name, arguments={"amount": "60000"}, writes=True,
                         connector="guarded_calls")
    assert isinstance(engine, GuardedCall)
    assert engine.arguments == outside.arguments == {"amount": 60000.0}
    assert outside.tool.needs_confirmation(outside.arguments)
    with pytest.raises(ToolArgumentsError):
        build_call(agent, CallRules(), user_id="alice", initiator="alice", org_id=None,
                   session_id="s", call_id="c1", run_id="r", tool_name=pay.name,
                   arguments={"amount": "lots"}, writes=True, connector="guarded_calls")


def _identity() -> CallIdentity:
    return CallIdentity(agent_id="buyer", user_id="alice", org_id="acme", run_id="r")


def _pay(amount: float) -> str:
    """Pay."""
    return f"paid {amount}"
